"""What a trainer plugin receives: the resolved components and a way to roll out a step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lego_rl.data import TrialResult
from lego_rl.kinds import Event, Filter, Inference, Optimizer
from lego_rl.spec.models import Spec

Group = list[TrialResult]
"""The trials of one task in one step (a GRPO group), trajectories attached."""


@dataclass
class RunContext:
    """Everything the outer loop needs; built by :func:`lego_rl.engine.run.apply`."""

    spec: Spec
    run_dir: Path
    inference: Inference
    optimizer: Optimizer
    filter: Filter
    rollout: Callable[[int], list[Group]]
    """Run every trial of one step (tasks_per_step x group_size) and return the groups."""
    emit: Callable[[Event], None]
    """Send an event to every observer (the run store included)."""
    log: Callable[[str], None] = print
    """A line for the person watching (per-step summary)."""
    engine_state: Callable[[], dict[str, Any]] = dict
    """The rollout's position (task order, per-task history): saved with a checkpoint."""
    restore_engine: Callable[[dict[str, Any]], None] = lambda state: None
    """Put the rollout back where a checkpoint left it (resume)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Engine extras: ``rollout_metrics()`` -> the latest rollout's metrics (trainer wait
    fraction, slot wait, trials in flight, version lag, inference busy share, informative
    group share), to merge into the step event; ``resume_from``: the checkpoint directory
    this run continues from, or None."""

    def event(self, kind: str, **data: Any) -> None:
        import time

        self.emit(Event(kind=kind, data=data, time=time.time()))
