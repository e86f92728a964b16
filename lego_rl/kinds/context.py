"""What a trainer receives: the run's resolved components and a way to roll out a step."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from lego_rl.kinds.values import Event, Group
from lego_rl.spec.models import Spec

if TYPE_CHECKING:
    from lego_rl.kinds.protocols import Filter, Inference, Optimizer


class EngineExtras(TypedDict, total=False):
    """What the engine adds to a :class:`RunContext` (absent when no engine runs the loop, as
    in a trainer's own tests)."""

    rollout_metrics: Callable[[], dict[str, float]]
    """The latest rollout's metrics (trainer wait fraction, slot wait, trials in flight,
    version lag, inference busy share, informative group share), to merge into the step event."""
    resume_from: Path | None
    """The checkpoint directory this run continues from; None for a fresh run."""


@dataclass
class RunContext:
    """What a :class:`Trainer` receives: the resolved components and a way to roll out a step;
    built by :func:`lego_rl.engine.run.apply`."""

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
    extra: EngineExtras = field(default_factory=lambda: EngineExtras())
    """What the engine adds (:class:`EngineExtras`)."""

    def event(self, kind: str, **data: Any) -> None:
        self.emit(Event(kind=kind, data=data, time=time.time()))
