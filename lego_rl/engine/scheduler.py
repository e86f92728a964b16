"""Synchronous rollout of one step: pick tasks, run their groups with bounded concurrency."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any
from concurrent.futures import ThreadPoolExecutor

from lego_rl.data import TrialResult
from lego_rl.engine.context import Group
from lego_rl.engine.trial import TrialRunner
from lego_rl.kinds import Task


class TaskCycle:
    """Hands out tasks in seeded shuffled order, reshuffling after each pass."""

    def __init__(self, tasks: list[Task], seed: int):
        if not tasks:
            raise ValueError("no tasks to run: the task source and filter left none")
        self._tasks = list(tasks)
        self._rng = random.Random(seed)
        self._queue: list[Task] = []

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


class SyncRollout:
    """Generate a whole step's groups, then return them (the trainer steps afterwards)."""

    def __init__(
        self,
        runner: TrialRunner,
        cycle: TaskCycle,
        *,
        tasks_per_step: int,
        group_size: int,
        concurrency: int,
        on_trial: Callable[[TrialResult], None] = lambda r: None,
    ):
        self.runner, self.cycle = runner, cycle
        self.tasks_per_step, self.group_size = tasks_per_step, group_size
        self.concurrency = concurrency
        self.on_trial = on_trial

    def __call__(self, step: int) -> list[Group]:
        tasks = self.cycle.take(self.tasks_per_step)
        jobs = [
            (task, f"s{step:04d}-{i:02d}-{task.name}-{k}", f"s{step:04d}-{i:02d}-{task.name}")
            for i, task in enumerate(tasks)
            for k in range(self.group_size)
        ]
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="trial") as pool:
            futures = [
                pool.submit(self._one, task, trial_id, step, group)
                for task, trial_id, group in jobs
            ]
            results = [f.result() for f in futures]
        groups: dict[str, Group] = {}
        for result in results:
            groups.setdefault(result.group, []).append(result)
        return list(groups.values())

    def state(self) -> dict[str, Any]:
        return {"cycle": self.cycle.state()}

    def restore(self, state: dict[str, Any]) -> None:
        self.cycle.restore(state["cycle"])

    def _one(self, task: Task, trial_id: str, step: int, group: str) -> TrialResult:
        result = self.runner.run(task, trial_id, step=step, group=group)
        self.on_trial(result)
        return result


def _jsonable(value: Any) -> Any:
    return [_jsonable(v) for v in value] if isinstance(value, tuple | list) else value


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
