"""``legorl bench sandbox``: start/stop cost of the local sandbox by repository size, and
the verifier's overhead.

Two synthetic tasks (10 and 10,000 files) are started and stopped ``--trials`` times each
after one warm-up start (which materialises the shared image); start cost should be flat
in repository size (overlayfs). ``copy_start_*`` shows the same start as a full copy, for
contrast. Pristine verification: sealing the starting state and the move to a fresh copy
with a one-file change (``*_seal_*``, ``*_pristine_*``). Verifier overhead:
``ScriptVerifier.score`` of a test.sh that only writes the reward, and one ``exec`` of ``true``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from lego_rl import hookimpl
from lego_rl.kinds import Task
from lego_rl.registry import BuildContext
from legorl_std.local_sandbox import LocalSandboxBackend, LocalSandboxOptions
from legorl_std.test_script import ScriptVerifier


def make_task(root: Path, files: int) -> Task:
    task = root / f"repo-{files}"
    app = task / "environment" / "app"
    for i in range(files):
        path = app / f"pkg{i // 100}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"VALUE = {i}\n" * 20)
    (task / "environment" / "Dockerfile").write_text("FROM python:3.12-slim\nWORKDIR /app\nCOPY app/ /app/\n")
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    return Task(name=task.name, path=task, instruction="bench", config={"verifier": {"timeout_sec": 60}})


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return round(statistics.median(ordered) * 1000, 2), round(p99 * 1000, 2)


def measure(backend: LocalSandboxBackend, task: Task, trials: int, tag: str) -> dict[str, float]:
    first = time.perf_counter()
    backend.start(task, f"{tag}-warm").stop()
    figures = {"first_start_ms": round((time.perf_counter() - first) * 1000, 1)}
    starts, stops = [], []
    for i in range(trials):
        t0 = time.perf_counter()
        box = backend.start(task, f"{tag}-{i}")
        t1 = time.perf_counter()
        box.stop()
        starts.append(t1 - t0)
        stops.append(time.perf_counter() - t1)
    figures["start_p50_ms"], figures["start_p99_ms"] = percentiles(starts)
    figures["stop_p50_ms"], figures["stop_p99_ms"] = percentiles(stops)
    return figures


def measure_pristine(backend: LocalSandboxBackend, task: Task, trials: int, tag: str) -> dict[str, float]:
    """What pristine verification costs a trial: sealing the starting state before the agent
    (``seal``) and moving to a fresh copy with the agent's change (``pristine``: one file)."""
    seals, moves = [], []
    for i in range(trials):
        box = backend.start(task, f"{tag}-{i}")
        try:
            t0 = time.perf_counter()
            box.begin_agent()
            seals.append(time.perf_counter() - t0)
            box.exec("echo 'VALUE = -1' >> /app/pkg0/mod0.py", timeout=30)
            t0 = time.perf_counter()
            box.begin_verify(task)
            moves.append(time.perf_counter() - t0)
        finally:
            box.stop()
    figures: dict[str, float] = {}
    figures["seal_p50_ms"], figures["seal_p99_ms"] = percentiles(seals)
    figures["pristine_p50_ms"], figures["pristine_p99_ms"] = percentiles(moves)
    return figures


def main(args: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="legorl bench sandbox")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--verify", type=int, default=5, help="Verifier runs to time.")
    opts = parser.parse_args(args)
    root = Path(tempfile.mkdtemp(prefix="legorl-bench-sandbox-", dir="/var/tmp"))
    small, large = make_task(root, 10), make_task(root, 10_000)
    ctx = BuildContext(run_dir=root / "run")
    overlay = LocalSandboxBackend(LocalSandboxOptions(keep=False), ctx)
    copy = LocalSandboxBackend(
        LocalSandboxOptions(keep=False, snapshot="copy", root=str(root / "copy")), BuildContext(spec_dir=root)
    )
    figures: dict[str, Any] = {"trials": opts.trials}
    for files, task in ((10, small), (10_000, large)):
        for key, value in measure(overlay, task, opts.trials, f"o{files}").items():
            figures[f"files_{files}_{key}"] = value
        copied = measure(copy, task, max(3, opts.trials // 4), f"c{files}")
        figures[f"files_{files}_copy_start_p50_ms"] = copied["start_p50_ms"]
    for files, task in ((10, small), (10_000, large)):
        for key, value in measure_pristine(overlay, task, max(3, opts.trials // 2), f"p{files}").items():
            figures[f"files_{files}_{key}"] = value
    execs, scores = [], []
    verifier = ScriptVerifier()
    for i in range(opts.verify):
        box = overlay.start(small, f"v{i}")
        try:
            t0 = time.perf_counter()
            box.exec("true", timeout=30)
            execs.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            result = verifier.score(box, small)
            scores.append(time.perf_counter() - t0)
            assert result.reward == 1.0, result.details
        finally:
            box.stop()
    figures["exec_true_p50_ms"] = percentiles(execs)[0]
    figures["verifier_overhead_p50_ms"] = percentiles(scores)[0]
    for line in (f"{k}: {v}" for k, v in figures.items()):
        print(line)
    return figures


@hookimpl
def legorl_register_benchmarks(register: Any) -> None:
    register("sandbox", main)
