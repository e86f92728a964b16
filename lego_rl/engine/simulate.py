"""The rollout pool under simulated time: trials and the trainer as timed events.

:class:`SimLauncher` stands in for the trial threads (a trial is a plan: duration, model
calls spread over it, reward or failure), :class:`SimInference` for the backend's policy
version, and :func:`train` for the trainer's loop (roll out, train for a while, push
weights through the same :class:`~lego_rl.engine.weights.WeightGate` as the engine). The
pool itself is the engine's :class:`~lego_rl.engine.pool.RolloutPool`, unchanged.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lego_rl.data import Termination, TrialResult, attribute
from lego_rl.engine.clock import SimClock
from lego_rl.engine.faults import timed_out
from lego_rl.engine.metrics import BusyMeter
from lego_rl.engine.pool import Job, RolloutPool
from lego_rl.engine.weights import WeightGate


@dataclass
class TrialPlan:
    """How a simulated trial goes."""

    seconds: float
    reward: float = 0.0
    calls: int = 1
    call_seconds: float = 0.0
    """Generation time of each call (the backend is busy for it)."""
    tokens_per_call: int = 100
    termination: Termination = Termination.COMPLETED


@dataclass
class SimInference:
    """A backend that only knows its policy version."""

    policy_version: int = 0
    tokenizer: Any = None
    updates: list[tuple[float, int]] = field(default_factory=list)

    def load_weights(self, state: Any, version: int) -> None:
        self.policy_version = version


class SimLauncher:
    """Runs pool jobs as scheduled events: calls spread evenly over the trial, then its end."""

    def __init__(
        self,
        clock: SimClock,
        plan: Callable[[Job], TrialPlan],
        inference: SimInference,
        busy: BusyMeter | None = None,
    ):
        self.clock, self.plan, self.inference = clock, plan, inference
        self.busy = busy or BusyMeter()
        self._cancelled: set[str] = set()
        self.launched: list[Job] = []

    def launch(self, job: Job, done: Callable[[TrialResult], None]) -> None:
        self.launched.append(job)
        plan = self.plan(job)
        start = self.clock.now()
        versions: list[list[int]] = []
        for i in range(plan.calls):
            at = start + plan.seconds * i / max(plan.calls, 1)
            self.clock.at(at, lambda: self._call(job, plan, versions))

        def end() -> None:
            if job.trial_id in self._cancelled:
                return
            result = TrialResult(
                trial_id=job.trial_id,
                task=job.task.name,
                group=job.group.name,
                step=job.version,
                reward=plan.reward if plan.termination == Termination.COMPLETED else 0.0,
                termination=plan.termination,
                attribution=attribute(plan.termination),
            )
            result.call_versions = [(v, n) for v, n in versions]
            done(result)

        self.clock.at(start + plan.seconds, end)

    def _call(self, job: Job, plan: TrialPlan, versions: list[list[int]]) -> None:
        if job.trial_id in self._cancelled:
            return
        now = self.clock.now()
        self.busy.add(now, now + plan.call_seconds)
        versions.append([self.inference.policy_version, plan.tokens_per_call])

    def abort(self, job: Job, why: str = "") -> TrialResult:
        self._cancelled.add(job.trial_id)
        return timed_out(
            job.trial_id, job.task.name, job.group.name, job.version, "agent", job.limit, why
        )


def train(
    pool: RolloutPool,
    clock: SimClock,
    inference: SimInference,
    steps: int,
    train_seconds: Callable[[int], float] | float,
) -> list[dict[str, float]]:
    """The trainer's loop in simulated time; returns each step's rollout metrics."""
    gate = WeightGate(inference, pool)
    seconds = train_seconds if callable(train_seconds) else (lambda _s: float(train_seconds))
    out = []
    for step in range(steps):
        groups = pool(step)
        out.append({**pool.metrics(), "groups": float(len(groups)), "time": clock.now()})
        clock.sleep(seconds(step))
        gate.load_weights(None, version=step + 1)
    pool.close()
    return out


def lognormal_plan(
    rng: random.Random,
    *,
    median: float,
    sigma: float,
    pass_rate: Callable[[str], float],
    call_every: float = 20.0,
    call_seconds: float = 2.0,
) -> Callable[[Job], TrialPlan]:
    """Heavy-tailed trial durations (a SWE-agent-like workload): lognormal around ``median``."""
    import math

    def plan(job: Job) -> TrialPlan:
        seconds = median * math.exp(rng.gauss(0.0, sigma))
        return TrialPlan(
            seconds=seconds,
            reward=float(rng.random() < pass_rate(job.task.name)),
            calls=max(1, int(seconds / call_every)),
            call_seconds=call_seconds,
        )

    return plan
