"""``legorl bench sandbox``: start/stop cost of the local sandbox by repository size, and
the verifier's overhead.

Two synthetic tasks (10 and 10,000 files) are started and stopped ``--trials`` times each
after one warm-up start (which materialises the shared image); start cost should be flat
in repository size (overlayfs). ``copy_start_*`` shows the same start as a full copy, for
contrast. Pristine verification: sealing the starting state and the move to a fresh copy
with a one-file change (``*_seal_*``, ``*_pristine_*``). Verifier overhead:
``ScriptVerifier.score`` of a test.sh that only writes the reward, and one ``exec`` of ``true``.

``--backend NAME`` (any sandbox of the registry: ``harbor``, ``docker``, ...; ``--options``
its options as JSON) measures that backend beside ``local`` in the same run instead: a trial's
sandbox ready (``start`` and a first ``exec``, which a container backend may create lazily)
and stopped, and whole ``TrialRunner`` trials of the kit's ``fix-add`` (the scripted fix
through a real proxy, the ``test-script`` verifier); ``trial_overhead_p50_ms`` is what the
backend adds to a trial over ``local``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from lego_rl import hookimpl
from lego_rl.data import Sampling, Termination
from lego_rl.engine.wiring import TrialLimits, TrialWiring
from lego_rl.kinds import Task
from lego_rl.registry import BuildContext, Registry, default_registry
from legorl_std.sandbox.local import LocalSandboxBackend, LocalSandboxOptions
from legorl_std.verifier.test_script import ScriptVerifier

BASE_IMAGE = "python:3.12-slim"


def make_task(root: Path, files: int) -> Task:
    task = root / f"repo-{files}"
    app = task / "environment" / "app"
    for i in range(files):
        path = app / f"pkg{i // 100}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"VALUE = {i}\n" * 20)
    (task / "environment" / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nWORKDIR /app\nCOPY app/ /app/\n")
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


FIX = "sed -i 's/a - b/a + b/' calc.py"
"""The scripted agent's fix of the kit's ``fix-add`` task."""


def trial_seconds(registry: Registry, ctx: BuildContext, backend: Any, task: Task, trial_id: str) -> float:
    """One whole trial of ``task`` on ``backend``: the scripted fix through a real proxy, the
    ``test-script`` verifier, no anti-cheat; it must end completed with reward 1."""
    wiring = TrialWiring.without_model("openai-chat", registry.build("dialect", "openai-chat", None, ctx))
    runner = wiring.runner(
        sandbox=backend, harness=registry.build("harness", "scripted", {"commands": [FIX]}, ctx),
        verifier=registry.build("verifier", "test-script", None, ctx), limits=TrialLimits(Sampling()),
    )  # fmt: skip
    with wiring.serving():
        start = time.perf_counter()
        result = runner.run(task, trial_id)
        seconds = time.perf_counter() - start
    if result.termination != Termination.COMPLETED or result.reward != 1.0:
        raise RuntimeError(f"bench trial {trial_id} ended {result.termination} (reward {result.reward}): {result.reason}")
    return seconds


def compare(name: str, options: dict[str, Any], trials: int, base: str = BASE_IMAGE) -> dict[str, Any]:
    """The sandbox ``name`` beside ``local``: ready/stop per trial and whole trials."""
    from lego_rl.testing.contracts.base import ContractEnv

    root = Path(tempfile.mkdtemp(prefix="legorl-bench-sandbox-", dir="/var/tmp"))
    try:
        registry = default_registry()
        env = ContractEnv(root, registry)
        ctx = env.build_context()
        task = env.task("fix-add")
        if base != BASE_IMAGE:  # a container backend builds the task's image on this base (a copy of the task)
            copy = shutil.copytree(task.path, root / "task")
            dockerfile = copy / "environment" / "Dockerfile"
            dockerfile.write_text(re.sub(r"(?m)^FROM \S+", f"FROM {base}", dockerfile.read_text(), count=1))
            task = task.model_copy(update={"path": copy})
        backends = {name: registry.build("sandbox", name, options, ctx), "local": registry.build("sandbox", "local", {"keep": False}, ctx)}
        figures: dict[str, Any] = {"trials": trials, "backend": name}
        for label, backend in backends.items():
            first = time.perf_counter()
            box = backend.start(task, f"{label}-warm")
            box.exec("true", timeout=600)  # an image build, a base image import: not a trial's
            box.stop()
            figures[f"{label}_first_start_ms"] = round((time.perf_counter() - first) * 1000, 1)
            readies, stops = [], []
            for i in range(trials):
                t0 = time.perf_counter()
                box = backend.start(task, f"{label}-{i}")
                box.exec("true", timeout=60)
                t1 = time.perf_counter()
                box.stop()
                readies.append(t1 - t0)
                stops.append(time.perf_counter() - t1)
            figures[f"{label}_ready_p50_ms"], figures[f"{label}_ready_p99_ms"] = percentiles(readies)
            figures[f"{label}_stop_p50_ms"], figures[f"{label}_stop_p99_ms"] = percentiles(stops)
            runs = [trial_seconds(registry, ctx, backend, task, f"{label}-trial-{i}") for i in range(trials)]
            figures[f"{label}_trial_p50_ms"], figures[f"{label}_trial_p99_ms"] = percentiles(runs)
        figures["trial_overhead_p50_ms"] = round(figures[f"{name}_trial_p50_ms"] - figures["local_trial_p50_ms"], 2)
        return figures
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(args: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="legorl bench sandbox")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--verify", type=int, default=5, help="Verifier runs to time.")
    parser.add_argument("--backend", help="Measure this sandbox of the registry beside local (harbor, docker, ...).")
    parser.add_argument("--options", default="{}", help="The backend's options, as a JSON object.")
    parser.add_argument(
        "--base", default=BASE_IMAGE,
        help="FROM of the task's image on a container backend (no registry: a local tag, e.g. legorl/base:bookworm).",
    )
    opts = parser.parse_args(args)
    if opts.backend and opts.backend != "local":
        compared = compare(opts.backend, json.loads(opts.options), opts.trials, opts.base)
        for line in (f"{k}: {v}" for k, v in compared.items()):
            print(line)
        return compared
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
