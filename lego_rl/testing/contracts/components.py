"""Contracts of the small kinds: tasks, verifier, anticheat, filter, optimizer, observer."""

from __future__ import annotations

import math
import time
from typing import Any

from lego_rl.data import CallRecord
from lego_rl.kinds import Event, Task
from lego_rl.testing.contracts.base import (
    ContractEnv,
    contract,
    expect,
    problems,
    result,
    satisfies_protocol,
)
from lego_rl.testing.contracts.sandbox import started


def _structure(kind: str) -> None:
    def check(component: Any, env: ContractEnv) -> None:
        satisfies_protocol(component, kind)
        problems(component)

    check.__doc__ = f"it has the {kind} shape and a well-formed preflight"
    contract(kind, "structure")(check)


for _kind in ("tasks", "verifier", "anticheat", "filter", "optimizer", "observer"):
    _structure(_kind)


@contract("tasks", "lists-tasks")
def lists_tasks(source: Any, env: ContractEnv) -> None:
    """tasks() lists uniquely named tasks with an instruction and tests"""
    tasks = source.tasks()
    expect(isinstance(tasks, list) and bool(tasks), "tasks() must return a non-empty list")
    names = [t.name for t in tasks]
    expect(len(set(names)) == len(names), f"task names must be unique: {names}")
    for task in tasks:
        expect(isinstance(task, Task), "tasks() items must be lego_rl.kinds.Task")
        expect(task.instruction.strip() != "", f"task {task.name}: empty instruction")
        expect((task.path / "tests").is_dir(), f"task {task.name}: no tests/ directory")


@contract("verifier", "scores-oracle-and-untouched")
def scores(verifier: Any, env: ContractEnv) -> None:
    """reward 1 after the task's oracle solution, 0 on the untouched task"""
    backend = env.sandbox_backend()
    task = env.task()
    for solve, expected in ((True, 1.0), (False, 0.0)):
        with started(backend, env, f"contract-verify-{int(solve)}") as sandbox:
            if solve:
                sandbox.upload(task.path / "solution", "/solution")
                out = sandbox.exec("bash /solution/solve.sh", timeout=60)
                expect(out.exit_code == 0, f"oracle failed: {out}")
            verdict = verifier.score(sandbox, task)
        expect(
            verdict.reward == expected,
            f"reward {verdict.reward} != {expected} ({'oracle' if solve else 'untouched'})",
        )


@contract("filter", "selects-and-keeps")
def selects(component: Any, env: ContractEnv) -> None:
    """select_tasks returns a subset of its input; keep_group answers with a bool"""
    tasks = [env.task()]
    kept = component.select_tasks(tasks)
    expect(all(t in tasks for t in kept), "select_tasks must return a subset of its input")
    expect(isinstance(component.keep_group([result(1.0), result(0.0)]), bool), "keep_group must return a bool")


@contract("optimizer", "advantages")
def advantages(component: Any, env: ContractEnv) -> None:
    """rewarded trials get higher advantages; a group whose rewards agree gets none"""
    adv = component.advantages([result(r, f"t{i}") for i, r in enumerate((1.0, 0.0, 1.0, 0.0))])
    expect(len(adv) == 4 and all(math.isfinite(a) for a in adv), f"bad advantages {adv}")
    expect(adv[0] > adv[1], "a rewarded trial must get a higher advantage than a failed one")
    flat = component.advantages([result(1.0, "a"), result(1.0, "b")])
    expect(all(a == 0 for a in flat), "a group whose rewards agree carries no advantage")


@contract("observer", "takes-every-event")
def takes_events(component: Any, env: ContractEnv) -> None:
    """emit() accepts every event kind of a run, then close() returns"""
    record = CallRecord(
        session="t", index=0, dialect="openai-chat", prompt_ids=[1], completion_ids=[2], logprobs=[-0.1]
    )
    for kind, data in (
        ("run_start", {"run_dir": str(env.tmp)}),
        ("call", {"record": record}),
        ("trial_end", {"result": result(1.0)}),
        ("step", {"step": 0, "reward_mean": 0.5}),
        ("run_end", {"status": "ok"}),
    ):
        component.emit(Event(kind=kind, data=data, time=time.time()))
    component.close()
