"""``run.rebalance``: tasks are drawn by their history (attempts, successes) so far. Tasks
always or never solved come up less often than informative ones, none is starved, and the
order is reproducible under the seed and across a resume (simulated time, no real trials)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from test_scheduler import make_pool

from lego_rl.engine.pool import Job, RolloutPool
from lego_rl.engine.run import pool_config
from lego_rl.engine.scheduler import MIN_WEIGHT, TaskCycle, task_weight
from lego_rl.engine.simulate import TrialPlan
from lego_rl.kinds import Task
from lego_rl.spec.models import RunSpec

KINDS = ("pass", "fail", "coin")
TASKS = [Task(name=f"{kind}{i}", path=Path("/x"), instruction="i") for kind in KINDS for i in range(4)]


def plan(job: Job) -> TrialPlan:
    """pass*: always solved, fail*: never, coin*: half of each group (always informative)."""
    kind = job.task.name.rstrip("0123456789")
    reward = {"pass": 1.0, "fail": 0.0, "coin": float(job.index % 2 == 0)}[kind]
    return TrialPlan(seconds=10.0, reward=reward)


def run(pool: RolloutPool, inference, steps: range) -> list[str]:
    """The task of every group handed to the trainer, in order."""
    order = []
    for step in steps:
        order += [g[0].task for g in pool(step)]
        inference.policy_version = step + 1
    return order


def drawn(seed: int = 0, rebalance: bool = True, steps: int = 60) -> tuple[list[str], RolloutPool]:
    pool, _, inference, _ = make_pool(plan, tasks=TASKS, rebalance=rebalance, seed=seed)
    return run(pool, inference, range(steps)), pool


def test_weight_favours_informative_tasks_and_never_reaches_zero() -> None:
    assert task_weight(0, 0) == task_weight(8, 4) == 1.0
    assert task_weight(8, 8) == pytest.approx(task_weight(8, 0)) == pytest.approx(0.36)
    assert task_weight(8, 8) < task_weight(8, 6) < task_weight(8, 4)
    assert task_weight(200, 200) == task_weight(200, 0) == MIN_WEIGHT > 0


def test_a_cycle_draws_in_proportion_to_weight_and_starves_none() -> None:
    tasks = TASKS[:10]
    weights = {t.name: (MIN_WEIGHT if t.name == "pass0" else 1.0) for t in tasks}
    cycle = TaskCycle(tasks, seed=3, weight=weights.__getitem__)
    counts = Counter(t.name for t in cycle.take(9100))  # about 1000 passes
    assert 60 <= counts["pass0"] <= 140, counts
    assert all(950 <= counts[t.name] <= 1000 for t in tasks[1:]), counts
    with pytest.raises(ValueError, match="positive"):
        TaskCycle(tasks, seed=0, weight=lambda name: 0.0).take(1)


def test_with_rebalance_uniform_tasks_are_drawn_less_but_still_drawn() -> None:
    order, pool = drawn()
    counts = Counter(order)
    by_kind = {k: [counts[t.name] for t in TASKS if t.name.startswith(k)] for k in KINDS}
    assert min(by_kind["coin"]) > max(by_kind["pass"] + by_kind["fail"])
    assert sum(by_kind["coin"]) > 2 * max(sum(by_kind["pass"]), sum(by_kind["fail"])), by_kind
    late = Counter(order[len(order) // 2 :])
    assert all(late[t.name] >= 1 for t in TASKS), f"a task was starved: {late}"
    metrics = pool.metrics()
    assert (metrics["tasks_seen"], metrics["tasks_always_solved"], metrics["tasks_never_solved"]) == (
        12.0, 4.0, 4.0,
    )  # fmt: skip

    plain = Counter(drawn(rebalance=False)[0])
    assert max(plain.values()) - min(plain.values()) <= 1, "without rebalance: plain passes"


def test_the_order_is_reproducible_under_the_seed_and_across_a_resume() -> None:
    first, _ = drawn(seed=1, steps=30)
    assert drawn(seed=1, steps=30)[0] == first
    assert drawn(seed=2, steps=30)[0] != first

    pool, _, inference, _ = make_pool(plan, tasks=TASKS, rebalance=True, seed=1)
    before = run(pool, inference, range(15))
    state = json.loads(json.dumps(pool.state()))  # what a checkpoint holds
    again, _, inference2, _ = make_pool(plan, tasks=TASKS, rebalance=True, seed=1)
    inference2.policy_version = 15
    again.restore(state)
    assert before + run(again, inference2, range(15, 30)) == first


def test_the_spec_option_reaches_the_pool() -> None:
    assert pool_config(RunSpec(rebalance=True)).rebalance
    assert not pool_config(RunSpec()).rebalance
