"""The rollout pool in simulated time: sync and async admission, the staleness bound, drains,
partial rollouts, replacement of uniform groups, retries, the watchdog, resume state and
shutdown."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from legorl_std.filters import GroupVarianceFilter, NoFilter

from lego_rl.data import Attribution, Termination, TrialResult
from lego_rl.engine.clock import SimClock
from lego_rl.engine.groups import first_version, informative
from lego_rl.engine.pool import RUN_ENDED, Job, PoolConfig, RolloutPool
from lego_rl.engine.scheduler import TaskCycle
from lego_rl.engine.simulate import SimInference, SimLauncher, TrialPlan, lognormal_plan, train
from lego_rl.kinds import Task

TASKS = [Task(name=f"t{i}", path=Path("/x"), instruction="i") for i in range(6)]


def make_pool(plan, *, filter=None, tasks=TASKS, seed=0, **config):
    clock = SimClock()
    inference = SimInference()
    launcher = SimLauncher(clock, plan, inference)
    defaults = dict(tasks_per_step=2, group_size=4, concurrency=8, trial_timeout=1000.0)
    pool = RolloutPool(
        PoolConfig(**{**defaults, **config}),
        TaskCycle(tasks, seed=seed),
        launcher,
        clock,
        version=lambda: inference.policy_version,
        filter=filter or NoFilter(),
        busy=launcher.busy,
    )
    return pool, clock, inference, launcher


def fixed(seconds=10.0, reward=1.0, calls=3):
    return lambda job: TrialPlan(seconds=seconds, reward=reward, calls=calls, call_seconds=1.0)


def test_sync_generates_a_step_only_when_the_trainer_asks() -> None:
    pool, clock, inference, launcher = make_pool(fixed(), concurrency=4)
    groups = pool(0)
    assert [len(g) for g in groups] == [4, 4]
    assert clock.now() == pytest.approx(20.0)  # 8 trials on 4 slots: two waves of 10 s
    clock.sleep(100.0)
    assert len(launcher.launched) == 8, "sync must not generate while the trainer steps"
    inference.policy_version = 1
    pool(1)
    assert {j.version for j in launcher.launched[8:]} == {1}
    assert pool.metrics()["trainer_wait_fraction"] == pytest.approx(20.0 / 120.0)


@pytest.mark.parametrize("partial", [False, True], ids=["drain", "partial"])
def test_async_staleness_bound_is_never_exceeded(partial: bool) -> None:
    rng = random.Random(1)
    plan = lognormal_plan(rng, median=30.0, sigma=1.2, pass_rate=lambda t: 0.5, call_every=5.0)
    pool, clock, inference, _ = make_pool(
        plan, max_staleness=1, partial_rollouts=partial, concurrency=16, trial_timeout=400.0
    )
    trained = 0
    for step in range(25):
        groups = pool(step)
        assert len(groups) == 2
        for group in groups:
            for trial in group:
                assert step - first_version(trial, trial.step) <= 1
                versions = {v for v, _ in trial.call_versions}
                if not partial:
                    assert len(versions) <= 1, "without partial rollouts a trial keeps one version"
                trained += 1
        assert pool.metrics()["version_lag_max"] <= 1 + (1 if partial else 0)
        clock.sleep(20.0)
        from lego_rl.engine.weights import WeightGate

        WeightGate(inference, pool).load_weights(None, version=step + 1)
    assert trained == 25 * 2 * 4


def test_partial_rollouts_keep_generating_across_updates() -> None:
    rng = random.Random(2)
    plan = lognormal_plan(rng, median=30.0, sigma=1.0, pass_rate=lambda t: 0.5, call_every=5.0)
    results = {}
    for name, config in {
        "sync": {},
        "drain": {"max_staleness": 1},
        "partial": {"max_staleness": 1, "partial_rollouts": True},
    }.items():
        pool, clock, inference, _ = make_pool(plan, concurrency=24, trial_timeout=400.0, **config)
        steps = train(pool, clock, inference, 20, 25.0)
        results[name] = sum(s["trainer_wait_s"] for s in steps) / clock.now()
    assert results["partial"] < results["drain"] < results["sync"]


def test_uniform_groups_are_replaced_within_the_budget() -> None:
    rates = {"t0": 0.0, "t1": 1.0, "t2": 0.5, "t3": 0.0, "t4": 1.0, "t5": 0.5}
    rng = random.Random(3)
    plan = lognormal_plan(rng, median=10.0, sigma=0.3, pass_rate=rates.__getitem__)
    pool, clock, inference, launcher = make_pool(plan, filter=GroupVarianceFilter(max_extra=10.0))
    for step in range(6):
        groups = pool(step)
        assert len(groups) == 2 and all(informative(g) for g in groups)
        metrics = pool.metrics()
        assert metrics["informative_group_share"] < 1.0 or step > 0
        inference.policy_version = step + 1
    assert len(launcher.launched) > 6 * 2 * 4  # replacements were generated

    # no budget: uniform groups are handed over (the trainer drops them), never an endless hunt
    pool, *_ = make_pool(fixed(reward=0.0), filter=GroupVarianceFilter(max_extra=0.0))
    groups = pool(0)
    assert len(groups) == 2 and not any(informative(g) for g in groups)
    assert pool.metrics()["unreplaced_groups"] == 2


def test_infrastructure_failures_are_retried_and_kept_out_of_the_group() -> None:
    def plan(job: Job) -> TrialPlan:
        if job.index == 0 and job.attempt == 0:
            return TrialPlan(seconds=5.0, termination=Termination.SANDBOX_ERROR)
        if job.index == 1:  # fails every time: retries run out
            return TrialPlan(seconds=5.0, termination=Termination.HARNESS_CRASH)
        return TrialPlan(seconds=10.0, reward=1.0)

    pool, _, _, launcher = make_pool(plan, tasks_per_step=1, retries=2)
    (group,) = pool(0)
    assert len(group) == 4
    by_member = {t.trial_id.split("-")[-1] if "-r" not in t.trial_id else t.trial_id: t for t in group}
    assert any(t.trial_id.endswith("-0-r1") and t.reward == 1.0 for t in group)
    crashed = [t for t in group if t.termination == Termination.HARNESS_CRASH]
    assert len(crashed) == 1 and crashed[0].trial_id.endswith("-1-r2")
    assert crashed[0].attribution == Attribution.INFRASTRUCTURE
    assert pool.metrics()["retried_trials"] == 3
    assert len(launcher.launched) == 4 + 3 and by_member


def test_watchdog_ends_a_stuck_trial_with_a_reason() -> None:
    def plan(job: Job) -> TrialPlan:
        return TrialPlan(seconds=10_000.0 if job.index == 2 else 10.0, reward=1.0)

    pool, clock, _, _ = make_pool(plan, tasks_per_step=1, trial_timeout=60.0, retries=0)
    (group,) = pool(0)
    stuck = [t for t in group if t.termination != Termination.COMPLETED]
    assert len(stuck) == 1 and stuck[0].termination == Termination.AGENT_TIMEOUT
    assert "watchdog" in stuck[0].reason and "60s" in stuck[0].reason
    assert clock.now() == pytest.approx(60.0)
    assert pool.metrics()["timed_out_trials"] == 1


def test_state_round_trips_and_no_trial_is_lost_or_repeated() -> None:
    rng = random.Random(4)
    plan = lognormal_plan(rng, median=10.0, sigma=1.0, pass_rate=lambda t: 0.5, call_every=2.0)
    config = dict(max_staleness=2, partial_rollouts=True, concurrency=16)
    pool, clock, inference, _ = make_pool(plan, **config)
    seen = []
    for step in range(3):
        seen += [t.trial_id for g in pool(step) for t in g]
        clock.sleep(5.0)
        inference.policy_version = step + 1
    state = json.loads(json.dumps(pool.state()))
    assert state["ready"] or state["open"], "async work was in flight at the checkpoint"
    ahead = [t.trial_id for g in pool(3) for t in g]

    again, clock2, inference2, _ = make_pool(plan, **config)
    inference2.policy_version = 3
    again.restore(state)
    resumed = [t.trial_id for g in again(3) for t in g]
    assert not set(resumed) & set(seen), "a consumed trial was handed over again"
    ready_ids = {m["trial_id"] for g in state["ready"] for m in g["members"] if m}
    assert ready_ids <= set(resumed) | {t for t in ahead}
    assert sorted(resumed) == sorted(set(resumed))


def test_bench_schedule_compares_the_three_modes_on_the_engine_pool() -> None:
    from lego_rl.bench.schedule import main

    figures = main(["--steps", "4", "--tasks-per-step", "4", "--slots", "64", "--tasks", "50"])
    for key in ("trainer_idle_sync", "trainer_idle_async", "trainer_idle_partial", "mean_staleness"):
        assert 0.0 <= figures[key] <= 1.0, key
    assert figures["max_staleness_partial"] <= 1 and figures["max_staleness_sync"] == 0
    assert figures["trainer_idle_partial"] < figures["trainer_idle_sync"]


def test_after_a_restart_no_trial_id_of_the_interrupted_run_is_reused() -> None:
    plan = lognormal_plan(random.Random(5), median=10.0, sigma=1.0, pass_rate=lambda t: 0.5)
    config = dict(max_staleness=1, partial_rollouts=True, concurrency=16)
    pool, clock, inference, launcher = make_pool(plan, **config)
    pool(0)
    inference.policy_version = 1
    state = json.loads(json.dumps(pool.state()))
    pool(1)  # the interrupted run went on past its checkpoint
    before = {j.trial_id for j in launcher.launched}
    again, _, inference2, launcher2 = make_pool(plan, **config)
    inference2.policy_version = 1
    again.restore(state)
    again(1)
    after = {j.trial_id for j in launcher2.launched}
    assert after and not after & before


class EndingLauncher(SimLauncher):
    """Like the thread launcher: a trial the pool cancels still ends a moment later (its
    sandbox stopped) and writes its end, which :attr:`log` records with the time."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.log: list[tuple[str, str, float]] = []
        self.reports: dict[str, Callable[[TrialResult], None]] = {}

    def launch(self, job: Job, done: Callable[[TrialResult], None]) -> None:
        def report(result: TrialResult) -> None:
            self.log.append(("trial_end", result.reason, self.clock.now()))
            done(result)

        self.reports[job.trial_id] = report
        super().launch(job, report)

    def abort(self, job: Job, why: str = "") -> TrialResult:
        verdict = super().abort(job, why)
        self.clock.at(self.clock.now() + 3.0, lambda: self.reports[job.trial_id](verdict))
        return verdict


def test_close_cancels_the_trials_in_flight_and_waits_for_their_ends() -> None:
    pool, clock, inference, _ = make_pool(fixed(seconds=100.0), max_staleness=1, concurrency=8)
    launcher = EndingLauncher(clock, fixed(seconds=100.0), inference)
    pool.launcher = launcher
    for step in range(2):
        pool(step)
        inference.policy_version = step + 1
    in_flight = len(pool.running)
    history = {k: list(v) for k, v in pool.history.items()}
    assert in_flight > 0, "async keeps generating past the last step"
    end = clock.now()
    pool.close()
    launcher.log.append(("run_end", "", clock.now()))
    cut = [entry for entry in launcher.log if entry[1] == RUN_ENDED]
    assert len(cut) == in_flight and launcher.log[-1][0] == "run_end"
    assert clock.now() == pytest.approx(end + 3.0), "close returns once the cancelled trials ended"
    assert pool.history == history and not pool.running, "cut-off trials count nowhere"
    before = len(launcher.launched)
    clock.sleep(1000.0)
    assert len(launcher.launched) == before, "a closed pool launches nothing"
    pool.close()  # again: nothing to do


def test_close_gives_up_on_trials_that_never_end() -> None:
    pool, clock, _, _ = make_pool(fixed(seconds=100.0), max_staleness=1)
    pool(0)
    assert pool.running
    start = clock.now()
    pool.close(grace=5.0)  # SimLauncher's cancelled trials never report
    assert clock.now() == pytest.approx(start + 5.0) and not pool.running


def test_a_cancelled_trial_is_nobodys_fault_and_never_retried() -> None:
    from lego_rl.data import Attribution, Termination
    from lego_rl.engine.faults import should_retry, timed_out

    verdict = timed_out("t-1", "task", "g", 3, "agent", 60.0, RUN_ENDED)
    assert verdict.termination == Termination.CANCELLED and verdict.reason == RUN_ENDED
    assert verdict.attribution == Attribution.NONE
    assert not should_retry(verdict, attempt=0, retries=3)
    watchdog = timed_out("t-2", "task", "g", 3, "agent", 60.0)
    assert watchdog.termination != Termination.CANCELLED
