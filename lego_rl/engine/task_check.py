"""Checking a spec's tasks: each task's own solution must earn 1 and doing nothing 0, through
the spec's sandbox, anti-cheat policies and verifier.

Two trials per task on the real trial pipeline: the oracle (``solution/solve.sh``, else the
task's ``oracle_commands``) and the no-op, each played by the ``scripted`` harness (found
through the registry like any spec's harness); the proxy runs but no model is called. A task
whose oracle does not earn 1, or whose no-op earns anything but a completed 0, is broken for
this spec: a policy could not learn from it, or would be paid for doing nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lego_rl.data import Sampling, Termination, TrialResult
from lego_rl.engine.wiring import TrialLimits, TrialWiring
from lego_rl.kinds import Task
from lego_rl.registry import BuildContext, Registry
from lego_rl.spec.resolve import Resolved

HARNESS = "scripted"
DIALECT = "openai-chat"


@dataclass(frozen=True)
class TaskCheck:
    """The two trials of one task."""

    task: str
    oracle: TrialResult | None
    """None when the task has no solution to run."""
    noop: TrialResult

    @property
    def problems(self) -> list[str]:
        """What is wrong with the task ([] when nothing is)."""
        found = []
        if self.oracle is None:
            found.append("no oracle: the task has neither solution/solve.sh nor [metadata] oracle_commands")
        elif self.oracle.reward != 1.0:
            found.append(f"the oracle earned {self.oracle.reward:g} ({_ending(self.oracle)})")
        if self.noop.reward != 0.0 or self.noop.termination != Termination.COMPLETED:
            found.append(f"doing nothing earned {self.noop.reward:g} ({_ending(self.noop)})")
        return found

    @property
    def ok(self) -> bool:
        return not self.problems


def oracle_script(task: Task) -> str | None:
    """The task's solution as one shell command: its ``solution/solve.sh``, else its oracle commands."""
    solve = task.path / "solution" / "solve.sh"
    if solve.is_file():
        return solve.read_bytes().decode("utf-8")  # as written: a patch in it may hold CRLF lines
    return "\n".join(task.oracle_commands) or None


def check_tasks(
    resolved: Resolved,
    registry: Registry,
    spec_path: Path,
    *,
    run_dir: Path,
    workers: int = 2,
    select: Callable[[Task], bool] = lambda task: True,
    on_check: Callable[[TaskCheck], None] = lambda check: None,
) -> list[TaskCheck]:
    """The oracle and the no-op of every selected task of the spec, ``workers`` tasks at a time;
    trial directories go under ``run_dir``."""
    spec = resolved.spec
    ctx = BuildContext(spec=spec, run_dir=run_dir, spec_dir=spec_path.resolve().parent)

    def build(path: str) -> Any:
        block = resolved.block(path)
        return registry.build(block.kind, block.block.plugin, block.options, ctx)

    tasks = [task for task in build("tasks").tasks() if select(task)]
    sandbox, verifier = build("sandbox"), build("verifier")
    anticheat = [build(f"anticheat.{i}") for i in range(len(spec.anticheat))]
    dialect = registry.build("dialect", DIALECT, {}, ctx)
    wiring = TrialWiring.without_model(DIALECT, dialect)
    limits = TrialLimits(Sampling())

    def trial(task: Task, commands: list[str], role: str) -> TrialResult:
        harness = registry.build("harness", HARNESS, {"commands": commands}, ctx)
        runner = wiring.runner(sandbox=sandbox, harness=harness, verifier=verifier, limits=limits, anticheat=anticheat)
        return runner.run(task, f"check-{task.name}-{role}")

    def check(task: Task) -> TaskCheck:
        script = oracle_script(task)
        result = TaskCheck(task.name, trial(task, [script], "oracle") if script else None, trial(task, [], "noop"))
        on_check(result)
        return result

    with wiring.serving(), ThreadPoolExecutor(max(1, workers)) as pool:
        return list(pool.map(check, tasks))


def _ending(result: TrialResult) -> str:
    reason = f": {result.reason.splitlines()[0][:200]}" if result.reason.strip() else ""
    return f"{result.termination.value}{reason}"
