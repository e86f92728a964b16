"""What the anti-cheat policies share: running checks in the sandbox, the agent's changes.

Policies work on any :class:`~lego_rl.kinds.Sandbox` through ``exec``, their phases as
:class:`~lego_rl.kinds.Check` scripts that the engine batches (one exec per phase); where a sandbox
offers more (the local sandbox's ``changes()`` from its overlay, ``writable_roots()``,
``kill_all()``, ``processes()``) they use it.
"""

from __future__ import annotations

import shlex
import time

from lego_rl.anticheat_checks import CHECK_TIMEOUT, CheckError, run_checks
from lego_rl.data import TrialResult
from lego_rl.kinds import Check, ReportsChanges, Sandbox, Task, Violation


class PolicyError(CheckError):
    """A policy could not establish its guarantee (the sandbox's fault, not the agent's)."""


class CheckedPolicy:
    """A policy whose phases are shell checks: ``before_agent_check`` / ``before_verify_check``
    (None: nothing to check), each hook running its own check alone for callers outside the
    engine, which batches the checks of all policies instead."""

    name: str

    def before_agent_check(self, sandbox: Sandbox, task: Task) -> Check | None:
        return None

    def before_verify_check(self, sandbox: Sandbox, task: Task) -> Check | None:
        return None

    def before_agent(self, sandbox: Sandbox, task: Task) -> list[Violation]:
        check = self.before_agent_check(sandbox, task)
        return run_checks(sandbox, [check]) if check else []

    def before_verify(self, sandbox: Sandbox, task: Task) -> list[Violation]:
        check = self.before_verify_check(sandbox, task)
        return run_checks(sandbox, [check]) if check else []

    def after(self, sandbox: Sandbox, task: Task, result: TrialResult) -> list[Violation]:
        return []


def run(sandbox: Sandbox, script: str, *, timeout: float = CHECK_TIMEOUT) -> str:
    """Run a check script inside; its stdout. A crash or timeout is a PolicyError."""
    result = sandbox.exec(script, timeout=timeout, cwd="/")
    if result.exit_code != 0:
        raise PolicyError(
            f"check script failed (exit {result.exit_code}{', timed out' if result.timed_out else ''}): "
            f"{result.stderr.strip()[-500:]}"
        )
    return result.stdout


def writable_roots(sandbox: Sandbox) -> list[str]:
    """Where the agent can leave files: the sandbox's own list, else the whole root."""
    return list(sandbox.writable_roots()) if isinstance(sandbox, ReportsChanges) else ["/"]


def changed_paths(sandbox: Sandbox, since: float | None) -> list[tuple[str, str]]:
    """(kind, path) of files the agent added, modified or deleted.

    From the sandbox's snapshot when it has one; else files whose inode changed since
    ``since`` (ctime, which a process cannot set back) under the writable roots.
    """
    if isinstance(sandbox, ReportsChanges):
        return [(c.kind, c.path) for c in sandbox.changes()]
    if since is None:
        return []
    roots = " ".join(shlex.quote(r) for r in writable_roots(sandbox))
    out = run(
        sandbox,
        f"find {roots} -xdev -newerct @{int(since) - 1} ! -type d "
        r"! -path '/proc/*' ! -path '/sys/*' ! -path '/dev/*' -print 2>/dev/null; true",
    )
    return [("modified", line) for line in out.splitlines() if line]


class Clock:
    """Per-trial start times for the ctime fallback (keyed by sandbox object)."""

    def __init__(self) -> None:
        self._starts: dict[int, float] = {}

    def mark(self, sandbox: Sandbox) -> None:
        self._starts[id(sandbox)] = time.time()

    def since(self, sandbox: Sandbox) -> float | None:
        return self._starts.get(id(sandbox))

    def forget(self, sandbox: Sandbox) -> None:
        self._starts.pop(id(sandbox), None)


def task_paths(task: Task) -> list[str]:
    return [str(task.path), str(task.path / "tests"), str(task.path / "solution")]
