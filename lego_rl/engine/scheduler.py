"""Which task comes next: seeded shuffled passes over the task list (the pool draws from it).

With a ``weight`` (``run.rebalance``: :func:`history_weight` of the pool's per-task
history) each pass is drawn by weight instead: a task joins the pass with probability
``w / max w`` and the pass is ordered by weighted random keys ``u ** (1 / w)``, so tasks
whose history says little (always solved, never solved) come up less often, yet never drop out.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lego_rl.kinds import Task

MIN_WEIGHT = 0.1
"""The weight of a task whose history is uniform: drawn less, never starved."""


def task_weight(attempts: int, successes: int) -> float:
    """How much a task is worth drawing: ``4 p (1 - p)`` of its smoothed pass rate
    ``p = (s + 1) / (a + 2)`` (1 for an unseen task or one solved half the time), at least
    :data:`MIN_WEIGHT`."""
    p = (successes + 1) / (attempts + 2)
    return max(MIN_WEIGHT, 4.0 * p * (1.0 - p))


def history_weight(history: Callable[[], Mapping[str, Sequence[int]]]) -> Callable[[str], float]:
    """A :class:`TaskCycle` weight from a per-task ``[attempts, successes]`` history, read
    anew at every pass (``history()`` returns the current mapping)."""

    def weight(name: str) -> float:
        attempts, successes = history().get(name, (0, 0))
        return task_weight(attempts, successes)

    return weight


class TaskCycle:
    """Hands out tasks in seeded shuffled order, reshuffling after each pass; with a
    ``weight`` (task name -> positive float) each pass is a weighted draw (module doc)."""

    def __init__(
        self, tasks: list[Task], seed: int, weight: Callable[[str], float] | None = None
    ):
        if not tasks:
            raise ValueError("no tasks to run: the task source and filter left none")
        self._tasks = list(tasks)
        self._rng = random.Random(seed)
        self._queue: list[Task] = []
        self.weight = weight

    @property
    def tasks(self) -> list[Task]:
        return list(self._tasks)

    def state(self) -> dict[str, Any]:
        return {"rng": _jsonable(self._rng.getstate()), "queue": [t.name for t in self._queue]}

    def restore(self, state: dict[str, Any]) -> None:
        self._rng.setstate(_tuples(state["rng"]))
        by_name = {t.name: t for t in self._tasks}
        self._queue = [by_name[n] for n in state["queue"] if n in by_name]

    def take(self, n: int) -> list[Task]:
        out: list[Task] = []
        while len(out) < n:
            if not self._queue:
                self._queue = self._pass()
            out.append(self._queue.pop())
        return out

    def _pass(self) -> list[Task]:
        """The next pass, in reverse (``take`` pops from the end)."""
        if self.weight is None:
            return self._rng.sample(self._tasks, len(self._tasks))
        weights = [self.weight(t.name) for t in self._tasks]
        bad = [(t.name, w) for t, w in zip(self._tasks, weights, strict=True) if not w > 0]
        if bad:
            raise ValueError(f"task weights must be positive numbers, got {bad[:3]}")
        top = max(weights)
        keyed = []
        for task, w in zip(self._tasks, weights, strict=True):
            joins = self._rng.random() * top < w  # the heaviest task always joins
            key = self._rng.random() ** (1.0 / w)
            if joins:
                keyed.append((key, task))
        keyed.sort(key=lambda kt: kt[0])
        return [task for _, task in keyed]


def _jsonable(value: Any) -> Any:
    return [_jsonable(v) for v in value] if isinstance(value, tuple | list) else value


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
