"""Contracts of the small kinds: tasks, verifier, anticheat, filter, optimizer, observer."""

from __future__ import annotations

import math
import time
import urllib.parse
import urllib.request
from typing import Any

from lego_rl.data import CallRecord
from lego_rl.kinds import Event, Serves, Task
from lego_rl.observe.store import RunStore
from lego_rl.testing.contracts.base import (
    ContractEnv,
    ContractError,
    contract,
    expect,
    problems,
    result,
    satisfies_protocol,
)
from lego_rl.testing.contracts.sandbox import started
from lego_rl.token_ids import TokenIds


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
        session="t", index=0, dialect="openai-chat", prompt_ids=TokenIds.of([1]), completion_ids=TokenIds.of([2]),
        logprobs=(-0.1,),
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


PROBE_METRIC = "contract_probe_metric"
"""A step metric the observer contract looks for in what an observer leaves."""


@contract("observer", "leaves-a-trace")
def leaves_trace(component: Any, env: ContractEnv) -> None:
    """a step it saw can be found afterwards: in a file under the run directory, or served (Serves)"""
    run_dir = env.build_context().run_dir
    assert run_dir is not None
    events: list[tuple[str, dict[str, Any]]] = [
        ("run_start", {"run_dir": str(run_dir)}),
        ("step", {"step": 1, "reward_mean": 0.5, PROBE_METRIC: 0.625}),
    ]
    served: str | None = None
    if isinstance(component, Serves):  # what it serves is the run store's: write one
        store = RunStore(run_dir)
        for kind, data in events:
            store.emit(Event(kind=kind, data=data, time=time.time()))
        store.close()
    try:
        for kind, data in events:
            component.emit(Event(kind=kind, data=data, time=time.time()))
        if isinstance(component, Serves):
            expect(component.url is not None, "it declares Serves, but its url is None after a step")
            served = fetched(component.url or "")
    finally:
        component.close()
    if served is not None:
        return
    files = [p for p in sorted(run_dir.rglob("*")) if p.is_file()]
    expect(
        any(PROBE_METRIC.encode() in p.read_bytes() for p in files),
        f"it left no trace of the step it saw: no file under the run directory names {PROBE_METRIC} "
        f"({len(files)} file(s) there), and it serves nothing (lego_rl.kinds.Serves)",
    )


def fetched(url: str) -> str:
    """The page at ``url`` (loopback only: an observer's contract talks to nothing else)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    expect(host in ("127.0.0.1", "localhost", "::1"), f"it serves on {host!r}; the contract reads loopback only")
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            body = response.read().decode(errors="replace")
            expect(response.status == 200 and bool(body), f"GET {url} answered {response.status}, {len(body)} bytes")
            return body
    except OSError as exc:
        raise ContractError(f"it declares Serves, but GET {url} failed: {exc}") from exc
