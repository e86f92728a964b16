"""Per-step rollout metrics: time integrals of slot use, inference busy share, version lag,
per-task history counts, token-boundary drift."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lego_rl.data import TrialResult
from lego_rl.engine.groups import trainable


@dataclass
class Integral:
    """The time integral of a piecewise-constant value (e.g. trials in flight)."""

    value: float = 0.0
    since: float = 0.0
    total: float = 0.0

    def set(self, now: float, value: float) -> None:
        self.total += self.value * max(0.0, now - self.since)
        self.value, self.since = value, now

    def read(self, now: float) -> float:
        return self.total + self.value * max(0.0, now - self.since)


@dataclass
class BusyMeter:
    """Intervals in which the inference backend generated; their union over a window."""

    intervals: list[tuple[float, float]] = field(default_factory=list)

    def add(self, start: float, end: float) -> None:
        if end > start:
            self.intervals.append((start, end))

    def share(self, t0: float, t1: float) -> float:
        """Fraction of [t0, t1] in which at least one generation ran; forgets older intervals."""
        self.intervals = [(a, b) for a, b in self.intervals if b > t0]
        if t1 <= t0:
            return 0.0
        busy, reach = 0.0, t0
        for a, b in sorted(self.intervals):
            a, b = max(a, reach), min(b, t1)
            if b > a:
                busy += b - a
                reach = b
        return busy / (t1 - t0)


def version_lag(groups: list[list[TrialResult]], current: int) -> tuple[float, int]:
    """Mean (token-weighted) and max policy-version lag of the sampled tokens of ``groups``."""
    tokens = weighted = 0
    worst = 0
    for group in groups:
        for trial in trainable(group):
            for version, n in trial.call_versions:
                lag = max(0, current - version)
                tokens += n
                weighted += lag * n
                worst = max(worst, lag)
    return (weighted / tokens if tokens else 0.0), worst


def token_boundary(groups: list[list[TrialResult]]) -> dict[str, float]:
    """Token-boundary health of the trials a step trains (from each trial's fidelity, every
    trajectory summed): mean context tokens per trial its calls' re-rendered histories did not
    reproduce (:mod:`lego_rl.proxy.boundary`), the share of trials with such a drift, and the
    trained tokens that were not sampled (0 unless our bookkeeping is broken: such a trial ends
    ``internal_error`` and is never trained)."""
    trials = [t for g in groups for t in trainable(g)]

    def total(trial: TrialResult, key: str) -> float:
        return sum(f.get(key, 0.0) for f in trial.fidelity)

    drifted = [total(t, "boundary_drift_tokens") for t in trials if total(t, "boundary_drifts")]
    return {
        "boundary_drift_tokens_mean": sum(drifted) / len(trials) if trials else 0.0,
        "boundary_drift_trial_share": len(drifted) / len(trials) if trials else 0.0,
        "trained_non_sampled_tokens": sum(total(t, "trained_non_sampled") for t in trials),
    }


def history_counts(history: Mapping[str, Sequence[int]]) -> dict[str, float]:
    """What the per-task history (``[attempts, successes]``) says so far: tasks tried, and
    of those the ones always solved and never solved (the ones a group rarely learns from)."""
    seen = [(a, s) for a, s in history.values() if a > 0]
    return {
        "tasks_seen": float(len(seen)),
        "tasks_always_solved": float(sum(s == a for a, s in seen)),
        "tasks_never_solved": float(sum(s == 0 for a, s in seen)),
    }
