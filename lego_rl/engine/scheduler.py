"""Which task comes next: seeded shuffled passes over the task list (the pool draws from it)."""

from __future__ import annotations

import random
from typing import Any

from lego_rl.kinds import Task


class TaskCycle:
    """Hands out tasks in seeded shuffled order, reshuffling after each pass."""

    def __init__(self, tasks: list[Task], seed: int):
        if not tasks:
            raise ValueError("no tasks to run: the task source and filter left none")
        self._tasks = list(tasks)
        self._rng = random.Random(seed)
        self._queue: list[Task] = []

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
                self._queue = self._rng.sample(self._tasks, len(self._tasks))
            out.append(self._queue.pop())
        return out


def _jsonable(value: Any) -> Any:
    return [_jsonable(v) for v in value] if isinstance(value, tuple | list) else value


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
