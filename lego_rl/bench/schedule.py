"""``legorl bench schedule``: sync vs async vs async with partial rollouts, at cluster scale.

A discrete-event simulation that runs the engine's own :class:`RolloutPool` (same admission,
staleness, drain and filter code) against simulated trials and a simulated trainer: trial
durations are lognormal (heavy-tailed, like SWE-agent trials), one trainer takes a fixed
time per step, N rollout slots. Prints per mode the trainer's idle share and the mean
policy-version lag of trained tokens; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

from lego_rl.engine.clock import SimClock
from lego_rl.engine.groups import KeepAll
from lego_rl.engine.pool import PoolConfig, RolloutPool
from lego_rl.engine.scheduler import TaskCycle
from lego_rl.engine.simulate import SimInference, SimLauncher, lognormal_plan, train
from lego_rl.kinds import Task

MODES: dict[str, dict[str, Any]] = {
    "sync": {},
    "async": {"max_staleness": 1},
    "partial": {"max_staleness": 1, "partial_rollouts": True},
}
"""The modes compared; ``--spare`` adds spare groups to the async ones."""


def parse(args: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="legorl bench schedule", description=__doc__)
    p.add_argument("--slots", type=int, default=512, help="trials in flight at once")
    p.add_argument("--tasks-per-step", type=int, default=32)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--median", type=float, default=90.0, help="median trial seconds")
    p.add_argument("--sigma", type=float, default=0.8, help="lognormal sigma (tail weight)")
    p.add_argument("--train-seconds", type=float, default=300.0, help="trainer time per step")
    p.add_argument("--trial-timeout", type=float, default=1800.0)
    p.add_argument("--call-every", type=float, default=15.0, help="seconds between model calls")
    p.add_argument("--call-seconds", type=float, default=3.0, help="generation time per call")
    p.add_argument("--tasks", type=int, default=500)
    p.add_argument("--spare", type=int, default=16, help="spare groups admitted (async modes)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(args)


def simulate(o: argparse.Namespace, mode: dict[str, Any]) -> dict[str, float]:
    """One mode's run; figures over all steps but the first (warm-up)."""
    rng = random.Random(o.seed)
    tasks = [Task(name=f"task{i:04d}", path=Path("/sim"), instruction="") for i in range(o.tasks)]
    rates = {t.name: rng.betavariate(0.6, 1.2) for t in tasks}
    clock, inference = SimClock(), SimInference()
    plan = lognormal_plan(
        rng,
        median=o.median,
        sigma=o.sigma,
        pass_rate=rates.__getitem__,
        call_every=o.call_every,
        call_seconds=o.call_seconds,
    )
    launcher = SimLauncher(clock, plan, inference)
    config = PoolConfig(
        tasks_per_step=o.tasks_per_step,
        group_size=o.group_size,
        concurrency=o.slots,
        trial_timeout=o.trial_timeout,
        retries=0,
        spare_groups=o.spare if mode else 0,
        **mode,
    )

    pool = RolloutPool(
        config,
        TaskCycle(tasks, o.seed),
        launcher,
        clock,
        version=lambda: inference.policy_version,
        filter=KeepAll(),
        busy=launcher.busy,
    )
    steps = train(pool, clock, inference, o.steps, o.train_seconds)[1:]
    span = steps[-1]["time"] - steps[0]["time"] + o.train_seconds
    trained = o.tasks_per_step * o.group_size * o.steps
    return {
        "trainer_idle": sum(s["trainer_wait_s"] for s in steps) / span,
        "mean_staleness": sum(s["version_lag_mean"] for s in steps) / len(steps),
        "max_staleness": max(s["version_lag_max"] for s in steps),
        "slot_busy": sum(s["slot_busy_fraction"] for s in steps) / len(steps),
        "inference_busy": sum(s["inference_busy_share"] for s in steps) / len(steps),
        "wasted_trials": 1.0 - trained / max(len(launcher.launched), 1),
        "seconds_per_step": span / len(steps),
    }


def main(args: list[str]) -> dict[str, Any]:
    o = parse(args)
    figures: dict[str, Any] = {
        "setting": {k: v for k, v in vars(o).items()},
    }
    for name, mode in MODES.items():
        result = simulate(o, mode)
        print(
            f"{name:8s} trainer idle {result['trainer_idle']:6.1%}  staleness mean "
            f"{result['mean_staleness']:.2f} max {result['max_staleness']:.0f}  slots busy "
            f"{result['slot_busy']:6.1%}  wasted {result['wasted_trials']:6.1%}  "
            f"{result['seconds_per_step']:.0f}s/step"
        )
        figures[f"trainer_idle_{name}"] = round(result["trainer_idle"], 4)
        figures[f"mean_staleness_{name}"] = round(result["mean_staleness"], 4)
        figures[f"max_staleness_{name}"] = result["max_staleness"]
        figures[f"wasted_trials_{name}"] = round(result["wasted_trials"], 4)
        figures[f"seconds_per_step_{name}"] = round(result["seconds_per_step"], 1)
    figures["mean_staleness"] = figures["mean_staleness_partial"]
    best = min(MODES, key=lambda m: figures[f"trainer_idle_{m}"])
    figures["best_mode"] = best
    figures["target_met"] = (
        figures[f"trainer_idle_{best}"] < 0.2 and figures[f"max_staleness_{best}"] <= 1
    )
    return figures
