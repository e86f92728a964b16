"""The rollout pool: up to ``concurrency`` trials in flight, complete groups to the trainer.

Admission decides when a new group may start: with staleness bound ``k``, at most
``(version + k + 1) * tasks_per_step`` groups are accepted or in flight, so a group
started at policy version ``v`` is due at step ``v + k`` at the latest (``sync`` is
``k = 0``: step ``s`` generates only after the trainer asked for it). A ready group whose
first token is older than ``k`` versions is dropped or re-queued; an in-flight one that
can no longer make it is cancelled. Without partial rollouts a weight update waits until
the trials in flight have finished (:meth:`RolloutPool.drain`), so no trajectory mixes
versions; with them, trials continue on the new weights and every call records its version.

The pool owns no thread and reads no time itself: a :class:`~lego_rl.engine.clock.Clock`
and a :class:`Launcher` drive it, so the engine and ``legorl bench schedule``'s simulation
run this same code.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from lego_rl.data import Attribution, TrialResult
from lego_rl.engine.clock import Clock
from lego_rl.engine.faults import TRIAL_TIMEOUT_MARGIN_S, should_retry
from lego_rl.engine.groups import first_version, informative
from lego_rl.engine.metrics import (
    BusyMeter,
    Integral,
    history_counts,
    token_boundary,
    version_lag,
)
from lego_rl.engine.scheduler import TaskCycle, history_weight
from lego_rl.kinds import Filter, Group, ResamplesGroups, Task
from lego_rl.proxy.budgets import cache_metrics

CLOSE_GRACE_S = 30.0
"""How long :meth:`RolloutPool.close` waits for the trials it cancelled to end."""

RUN_ENDED = "cancelled: the run ended"
STALE = "cancelled: too stale to train"
"""Why the pool cancels trials (the ``why`` of :meth:`Launcher.abort`)."""


@dataclass(frozen=True)
class PoolConfig:
    tasks_per_step: int
    group_size: int
    concurrency: int
    max_staleness: int = 0
    partial_rollouts: bool = False
    stale: Literal["requeue", "drop"] = "requeue"
    retries: int = 2
    trial_timeout: float | None = None
    """Seconds a trial may run; None: the task's agent + verifier timeouts + a margin."""
    spare_groups: int = 0
    """Groups admitted beyond what the staleness bound needs, so that stragglers do not hold
    up a batch: the first complete groups are trained, late ones at the next step (within
    the bound) or cancelled."""
    rebalance: bool = False
    """Draw tasks by what their history says (:func:`~lego_rl.engine.scheduler.task_weight`):
    always-solved and never-solved tasks less often, none dropped."""


@dataclass
class Job:
    """One attempt of one group member."""

    trial_id: str
    task: Task
    group: OpenGroup
    index: int
    attempt: int
    version: int
    """Policy version when it was launched (a lower bound of its first token's version)."""
    limit: float
    """Wall-clock seconds it may run."""
    deadline: float


@dataclass
class OpenGroup:
    seq: int
    task: Task
    members: list[TrialResult | None]
    versions: list[int | None]
    """Per member: the version of its first sampled token (once finished)."""
    epoch: int = 0
    """How many resumes preceded its opening: names stay unique across restarts."""
    cancelled: bool = False

    @property
    def name(self) -> str:
        return f"g{self.seq:05d}-{self.task.name}" + (f"-e{self.epoch}" if self.epoch else "")

    @property
    def complete(self) -> bool:
        return all(m is not None for m in self.members)

    def results(self) -> Group:
        return [m for m in self.members if m is not None]


class Launcher(Protocol):
    """Runs trials for the pool (threads for real, scheduled events in a simulation)."""

    def launch(self, job: Job, done: Callable[[TrialResult], None]) -> None:
        """Start ``job``; call ``done(result)`` when it ends (from any thread)."""
        ...

    def abort(self, job: Job, why: str = "") -> TrialResult:
        """End a running job the pool gave up on and return its result: the watchdog's verdict
        for the phase it was stuck in, or ``why`` as the reason when it was cancelled."""
        ...


class RolloutPool:
    """``pool(step)`` returns the next ``tasks_per_step`` complete groups (the trainer's rollout)."""

    def __init__(
        self,
        config: PoolConfig,
        cycle: TaskCycle,
        launcher: Launcher,
        clock: Clock,
        *,
        version: Callable[[], int],
        filter: Filter,
        on_trial: Callable[[TrialResult], None] = lambda r: None,
        busy: BusyMeter | None = None,
    ):
        self.config, self.cycle, self.launcher, self.clock = config, cycle, launcher, clock
        self.version, self.filter, self.on_trial = version, filter, on_trial
        self.k = config.max_staleness
        self.resample_budget = float(filter.resample_budget) if isinstance(filter, ResamplesGroups) else 0.0
        """Extra groups per batch (fraction of tasks_per_step) that may replace ones the filter
        rejects; a filter that does not resample gets none (its rejects are handed over)."""
        self.queue: deque[tuple[OpenGroup, int, int]] = deque()
        self.running: dict[str, Job] = {}
        self.open: dict[int, OpenGroup] = {}
        self.ready: list[OpenGroup] = []
        self.requeued: deque[Task] = deque()
        self.history: dict[str, list[int]] = {}
        """Task -> [attempts, successes] of its policy-attributed trials."""
        if config.rebalance:
            cycle.weight = history_weight(lambda: self.history)
        self.seq = self.consumed = self.step = self.epoch = 0
        self.taken_at = -1
        """Policy version at the latest batch handed to the trainer."""
        self.draining = self.closed = self.waiting = False
        self.busy = busy or BusyMeter()
        """Generation intervals of the inference backend (fed by the proxy's call records)."""
        self.last_metrics: dict[str, float] = {}
        self._counts: dict[str, int] = {}
        self._in_flight = Integral()
        self._rejected_in_batch = 0
        self._informative = [0, 0]
        self._mark = self._enter = 0.0
        self._trainer_wait = 0.0

    # ------------------------------------------------------------ the trainer's side

    def __call__(self, step: int) -> list[Group]:
        with self.clock.lock:
            self.step = step
            self._enter = self.clock.now()
            if not self._mark:
                self._mark = self._enter
            self._fill()
            self.waiting = True
            try:
                self._wait(lambda: len(self.ready) >= self.config.tasks_per_step)
            finally:
                self.waiting = False
            self.taken_at = self.version()
            batch = self.ready[: self.config.tasks_per_step]
            del self.ready[: self.config.tasks_per_step]
            self.consumed += len(batch)
            self._rejected_in_batch = 0
            groups = [g.results() for g in batch]
            self._measure(groups)
            self._fill()  # async: keep generating while the trainer steps
            return groups

    def drain(self) -> None:
        """Before a weight update without partial rollouts: let every trial in flight finish."""
        with self.clock.lock:
            start = self.clock.now()
            self.draining = True
            self._wait(lambda: not self.running)
            self._trainer_wait += self.clock.now() - start

    def updated(self) -> None:
        """After a weight update: admit work for the new version."""
        with self.clock.lock:
            self.draining = False
            self._fill()

    def close(self, grace: float = CLOSE_GRACE_S) -> None:
        """End of run (or interrupt): stop launching, cancel the trials in flight and wait up
        to ``grace`` seconds for them to end, so that each one's end is recorded before the
        run's. Their results count nowhere: no group, no history, no retry."""
        with self.clock.lock:
            self.closed = True
            self.queue.clear()
            for job in list(self.running.values()):
                self.launcher.abort(job, RUN_ENDED)
            self.clock.wait(lambda: not self.running, self.clock.now() + grace)
            self.running.clear()  # stragglers past the grace period are left behind

    def metrics(self) -> dict[str, float]:
        """The metrics of the latest ``pool(step)`` (merged into the trainer's step event),
        the bytes in the proxy's caches included (:func:`~lego_rl.proxy.budgets.cache_metrics`)."""
        return dict(self.last_metrics)

    # ------------------------------------------------------------ admission and launch

    def _due(self) -> int:
        """The step the trainer works towards: the policy version, or the step it asked for."""
        return max(self.version(), self.step)

    def _can_open(self) -> bool:
        if self.draining or self.closed or (self.k == 0 and not self.waiting):
            return False  # sync generates only while the trainer waits for its batch
        allowed = (self._due() + self.k + 1) * self.config.tasks_per_step + self.config.spare_groups
        return self.consumed + len(self.ready) + len(self.open) < allowed

    def _fill(self) -> None:
        if self.draining or self.closed:
            return
        while len(self.running) < self.config.concurrency:
            if not self.queue:
                if not self._can_open():
                    break
                self._open_group()
            group, index, attempt = self.queue.popleft()
            if not group.cancelled:
                self._launch(group, index, attempt)
        self._in_flight.set(self.clock.now(), len(self.running))

    def _open_group(self) -> None:
        task = self.requeued.popleft() if self.requeued else self.cycle.take(1)[0]
        n = self.config.group_size
        group = OpenGroup(self.seq, task, [None] * n, [None] * n, self.epoch)
        self.seq += 1
        self.open[group.seq] = group
        self.queue.extend((group, i, 0) for i in range(n))

    def _launch(self, group: OpenGroup, index: int, attempt: int) -> None:
        trial_id = f"{group.name}-{index}" + (f"-r{attempt}" if attempt else "")
        if self.epoch != group.epoch:  # a member run again after a restart
            trial_id += f"-e{self.epoch}"
        limit = self._limit(group.task)
        job = Job(
            trial_id, group.task, group, index, attempt, self.version(), limit,
            self.clock.now() + limit,
        )
        self.running[trial_id] = job
        self.launcher.launch(job, lambda result: self._done(job, result))

    def _limit(self, task: Task) -> float:
        if self.config.trial_timeout is not None:
            return self.config.trial_timeout
        return task.agent_timeout + task.verifier_timeout + TRIAL_TIMEOUT_MARGIN_S

    # ------------------------------------------------------------ results

    def _done(self, job: Job, result: TrialResult) -> None:
        with self.clock.lock:
            if self.running.pop(job.trial_id, None) is None or self.closed:
                self.clock.notify()  # given up on already (watchdog, stale) or cut off (close)
                return
            self._settle(job, result)
            self._fill()
            self.clock.notify()

    def _settle(self, job: Job, result: TrialResult) -> None:
        group = job.group
        if group.cancelled:
            return
        self.on_trial(result)
        if should_retry(result, job.attempt, self.config.retries):
            self._count("retried_trials")
            self.queue.appendleft((group, job.index, job.attempt + 1))
            return
        if result.attribution != Attribution.INFRASTRUCTURE:
            seen = self.history.setdefault(result.task, [0, 0])
            seen[0] += 1
            seen[1] += int(result.reward > 0)
        group.members[job.index] = result
        group.versions[job.index] = first_version(result, job.version)
        if group.complete:
            self._complete(group)

    def _complete(self, group: OpenGroup) -> None:
        del self.open[group.seq]
        results = group.results()
        self._informative[0] += int(informative(results))
        self._informative[1] += 1
        budget = math.ceil(self.resample_budget * self.config.tasks_per_step)
        if not self.filter.keep_group(results):
            if self._rejected_in_batch < budget:
                self._rejected_in_batch += 1
                self._count("replaced_groups")
                return  # admission now lets a replacement start
            self._count("unreplaced_groups")
        self.ready.append(group)

    # ------------------------------------------------------------ waiting, watchdog, staleness

    def _wait(self, done: Callable[[], bool]) -> None:
        while True:
            self._expire()
            self._drop_stale()
            self._fill()
            if done():
                return
            if not self.running and not self.queue and not self._can_open():
                raise RuntimeError(
                    f"rollout pool stalled at step {self.step}: nothing in flight and admission "
                    f"closed ({self.consumed} groups consumed, {len(self.ready)} ready, "
                    f"version {self.version()}, max_staleness {self.k})"
                )
            deadline = min((j.deadline for j in self.running.values()), default=None)
            self.clock.wait(done, deadline)

    def _expire(self) -> None:
        now = self.clock.now()
        for job in [j for j in self.running.values() if j.deadline <= now]:
            del self.running[job.trial_id]
            self._count("timed_out_trials")
            self._settle(job, self.launcher.abort(job))

    def _drop_stale(self) -> None:
        """Drop ready groups too old to train; cancel in-flight ones that can no longer be."""
        current = self.version()
        for group in list(self.ready):
            if current - min(v for v in group.versions if v is not None) > self.k:
                self.ready.remove(group)
                self._discard(group, "stale_groups")
        next_take = current + 1 if self.taken_at >= current else current
        for group in list(self.open.values()):
            jobs = [j for j in self.running.values() if j.group is group]
            versions = [v for v in group.versions if v is not None] + [j.version for j in jobs]
            if versions and next_take - min(versions) > self.k:
                del self.open[group.seq]
                group.cancelled = True
                for job in jobs:
                    del self.running[job.trial_id]
                    self.launcher.abort(job, STALE)
                self._discard(group, "cancelled_groups")

    def _discard(self, group: OpenGroup, counter: str) -> None:
        self._count(counter)
        if self.config.stale == "requeue":
            self.requeued.append(group.task)

    def _count(self, name: str) -> None:
        self._counts[name] = self._counts.get(name, 0) + 1

    # ------------------------------------------------------------ metrics

    def _measure(self, groups: list[Group]) -> None:
        now = self.clock.now()
        period = max(now - self._mark, 1e-9)
        wait = now - self._enter + self._trainer_wait
        lag_mean, lag_max = version_lag(groups, self.version())
        informative_share = self._informative[0] / self._informative[1] if self._informative[1] else 0.0
        self.last_metrics = {
            "trainer_wait_fraction": min(1.0, wait / period),
            "trainer_wait_s": wait,
            "slot_busy_fraction": self._in_flight.read(now) / (period * self.config.concurrency),
            "slot_wait_s": period - self._in_flight.read(now) / self.config.concurrency,
            "trials_in_flight": float(len(self.running)),
            "trials_in_flight_mean": self._in_flight.read(now) / period,
            "version_lag_mean": lag_mean,
            "version_lag_max": float(lag_max),
            "inference_busy_share": self.busy.share(self._mark, now),
            "informative_group_share": informative_share,
            **history_counts(self.history),
            **token_boundary(groups),
            **{k: float(v) for k, v in self._counts.items()},
            **cache_metrics(),
        }
        self._mark, self._trainer_wait = now, 0.0
        self._in_flight = Integral(len(self.running), now)
        self._counts = {}
        self._informative = [0, 0]

    # ------------------------------------------------------------ resume

    def state(self) -> dict[str, Any]:
        """Everything to continue after a restart: finished trials of unconsumed groups included."""
        with self.clock.lock:
            def dump(group: OpenGroup) -> dict[str, Any]:
                return {
                    "seq": group.seq,
                    "task": group.task.name,
                    "members": [m.model_dump(mode="json") if m else None for m in group.members],
                    "versions": group.versions,
                    "epoch": group.epoch,
                }

            return {
                "cycle": self.cycle.state(),
                "seq": self.seq,
                "consumed": self.consumed,
                "history": self.history,
                "ready": [dump(g) for g in self.ready],
                "open": [dump(g) for g in self.open.values()],
                "requeued": [t.name for t in self.requeued],
                "epoch": self.epoch,
            }

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state`: unfinished members of open groups run again. Trials
        started from here on get names unused by the interrupted run (``-e<resumes>``)."""
        with self.clock.lock:
            self.cycle.restore(state["cycle"])
            by_name = {t.name: t for t in self.cycle.tasks}
            self.seq, self.consumed = state.get("seq", 0), state.get("consumed", 0)
            self.epoch = state.get("epoch", 0) + 1
            self.history = {k: list(v) for k, v in state.get("history", {}).items()}
            self.requeued = deque(by_name[n] for n in state.get("requeued", []) if n in by_name)

            def load(raw: dict[str, Any]) -> OpenGroup | None:
                task = by_name.get(raw["task"])
                if task is None:
                    return None
                members = [TrialResult.model_validate(m) if m else None for m in raw["members"]]
                return OpenGroup(
                    raw["seq"], task, members, list(raw["versions"]), raw.get("epoch", 0)
                )

            self.ready = [g for g in map(load, state.get("ready", [])) if g is not None]
            for group in filter(None, map(load, state.get("open", []))):
                self.open[group.seq] = group
                self.queue.extend((group, i, 0) for i, m in enumerate(group.members) if m is None)
