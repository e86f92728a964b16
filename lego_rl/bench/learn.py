"""``legorl bench learn``: does a spec's policy measurably learn, across seeds?

Runs ``legorl apply SPEC run.seed=I run.name=NAME-seedI [KEY=VALUE...]`` once per seed, each
in its own process (so each seed starts cold and returns its memory), then reads each run's
``report/report.json`` (written by ``apply``; written here when missing) and prints the means
over seeds of the training reward windows, the held-out success before/after, the minutes
and the time split per step, plus every seed's own figures and whether the targets are met.
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from lego_rl.observe.report import SPLIT, read_report, write_report

FIGURES = (
    "reward_first10", "reward_last10", "gain", "reward_trained_first10", "reward_trained_last10",
    "gain_trained", "heldout_before", "heldout_after",
    "heldout_gain", "heldout_baseline", "heldout_blind_baseline", "heldout_over_blind", "verified_after_edit_gain", "tests_after_change_gain",
    "informative_share", "minutes", "run_minutes", *SPLIT,
)  # fmt: skip
"""Per-seed figures; each is averaged over the seeds that report it. ``minutes`` is the whole
``legorl apply`` (set-up, warm start, evaluations, training); ``run_minutes`` the run alone
(the store's run_start to run_end)."""
TARGETS = {
    "heldout_gain": (">=", 0.25), "heldout_over_blind": (">", 0.0), "gain": (">=", 0.3), "minutes": ("<=", 20.0),
}  # fmt: skip
"""The issue's targets, checked on the means over seeds: ``heldout_over_blind`` is held-out
success after training less the best fixed policy that edits without testing."""
FINISHED = re.compile(r"run finished: (.+?)\s*$")
"""The line ``legorl apply`` ends with, naming the run directory it wrote."""


def parse(args: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="legorl bench learn", description=__doc__)
    p.add_argument("--spec", type=Path, default=Path("specs/quickstart.yaml"))
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1, one run each")
    p.add_argument("--name", help="run name prefix (default: the spec's run.name)")
    p.add_argument("overrides", nargs="*", help="KEY=VALUE overrides passed to every run")
    o = p.parse_args(args)
    if o.seeds < 1:
        p.error("--seeds must be at least 1")
    if not o.spec.is_file():
        p.error(f"spec {o.spec} not found (give --spec PATH)")
    bad = [x for x in o.overrides if "=" not in x]
    if bad:
        p.error(f"overrides must be KEY=VALUE, got {' '.join(bad)}")
    return o


def run_name(spec: Path) -> str:
    """The spec's ``run.name`` (the file's stem when it names none)."""
    try:
        loaded = yaml.safe_load(spec.read_text()) or {}
    except yaml.YAMLError:
        loaded = {}
    return str((loaded.get("run") or {}).get("name") or spec.stem)


def run_seed(spec: Path, seed: int, name: str, overrides: list[str]) -> dict[str, Any]:
    """One ``legorl apply`` in a child process; its output is echoed with a seed prefix.
    Returns the run directory it reported (None if it failed), exit code and wall minutes."""
    command = [
        sys.executable, "-m", "lego_rl.cli.main", "apply", str(spec), *overrides,
        f"run.seed={seed}", f"run.name={name}-seed{seed}",
    ]  # fmt: skip
    started = time.monotonic()
    run_dir: Path | None = None
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as child:
        assert child.stdout is not None
        for line in child.stdout:
            print(f"[seed {seed}] {line}", end="", flush=True)
            found = FINISHED.search(line)
            if found:
                run_dir = Path(found.group(1))
    rc = child.returncode
    return {
        "seed": seed,
        "rc": rc,
        "run_dir": str(run_dir) if run_dir and rc == 0 else None,
        "minutes": (time.monotonic() - started) / 60,
    }


def seed_figures(run: dict[str, Any], report: dict[str, Any] | None) -> dict[str, Any]:
    """One seed's figures from its run and report (all None when the run failed)."""
    report = report or {}
    split = (report.get("time_split") or {}).get("mean") or {}
    figures = {k: report.get(k) for k in FIGURES if k not in SPLIT}
    figures.update({k: split.get(k) for k in SPLIT}, run_minutes=report.get("minutes"))
    figures.update(run)
    return figures


def aggregate(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over seeds (a seed without a figure is left out of that mean), the per-seed
    figures, and the targets checked on the means (unknown means do not meet them)."""
    means: dict[str, float | None] = {}
    for key in FIGURES:
        known = [s[key] for s in per_seed if s.get(key) is not None]
        means[key] = sum(known) / len(known) if known else None
    met = {key: _meets(means[key], *rule) for key, rule in TARGETS.items()}
    return {
        **means,
        "seeds": len(per_seed),
        "failed_seeds": [s["seed"] for s in per_seed if s.get("rc")],
        "per_seed": per_seed,
        "targets": {k: f"{op} {v}" for k, (op, v) in TARGETS.items()},
        "targets_met": met,
        "all_targets_met": all(met.values()) and not any(s.get("rc") for s in per_seed),
    }


def _meets(value: float | None, op: str, bound: float) -> bool:
    if value is None:
        return False
    return {">=": value >= bound, ">": value > bound, "<=": value <= bound}[op]


def main(args: list[str]) -> dict[str, Any]:
    o = parse(args)
    name = o.name or run_name(o.spec)
    per_seed = []
    for seed in range(o.seeds):
        run = run_seed(o.spec, seed, name, o.overrides)
        report = None
        if run["run_dir"]:
            report = read_report(Path(run["run_dir"]))
            if report is None:
                write_report(Path(run["run_dir"]))
                report = read_report(Path(run["run_dir"]))
        per_seed.append(seed_figures(run, report))
    result = aggregate(per_seed)
    for s in per_seed:
        print(
            f"seed {s['seed']}: reward {_f(s['reward_first10'])} -> {_f(s['reward_last10'])}  "
            f"held-out {_f(s['heldout_before'])} -> {_f(s['heldout_after'])} "
            f"(blind baseline {_f(s['heldout_blind_baseline'])})  "
            f"held-out gains: verified after edit {_f(s['verified_after_edit_gain'])}, "
            f"tests after change {_f(s['tests_after_change_gain'])}  "
            f"{_f(s['minutes'])} min  {s['run_dir'] or 'FAILED (exit ' + str(s['rc']) + ')'}"
        )
    return result


def _f(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"
