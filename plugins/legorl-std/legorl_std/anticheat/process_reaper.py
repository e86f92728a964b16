"""Anti-cheat ``process-reaper``: nothing of the agent runs while the verifier does.

Before the verifier: commands still running are killed (``kill_all``), and any process of
the trial's user still alive afterwards, or any process a fresh command can see besides
itself, is a violation (and is killed). After: processes that outlived ``tests/test.sh``
(the verifier's ``details["survivors"]``: code under test racing the reward file) are a
violation.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from lego_rl.data import TrialResult
from lego_rl.kinds import CheatDemo, Check, KillsCommands, ListsProcesses, Sandbox, Task, Violation
from lego_rl.registry import BuildContext
from legorl_std.anticheat.common import CheckedPolicy
from legorl_std.sandbox.reap import KILL_OTHERS


class ProcessReaperOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProcessReaper(CheckedPolicy):
    name = "process-reaper"

    def before_verify_check(self, sandbox: Sandbox, task: Task) -> Check:
        if isinstance(sandbox, KillsCommands):
            sandbox.kill_all()
        found: list[str] = []
        escaped = sandbox.processes() if isinstance(sandbox, ListsProcesses) else []
        for pid in escaped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if escaped:
            found.append(f"{len(escaped)} process(es) of the trial's user outlived the agent phase")

        def judge(text: str) -> list[Violation]:
            others = int(text.split()[-1])
            still = [f"{others} process(es) of the agent phase still ran in the sandbox"] if others else []
            return [Violation(self.name, message) for message in found + still]

        return Check(self.name, KILL_OTHERS, judge)

    def cheat_demonstration(self, scratch: Path) -> CheatDemo:
        """A process of the agent phase still running when the verifier would start. What the
        check reads then is shown to its judge: a sandbox whose commands take their processes
        with them when they end (the local sandbox's pid namespaces) leaves nothing to stage."""
        return CheatDemo("before_verify", seen="1\n")

    def after(self, sandbox: Sandbox, task: Task, result: TrialResult) -> list[Violation]:
        survivors = int(result.verifier.get("survivors", 0) or 0)
        if survivors:
            return [
                Violation(
                    self.name,
                    f"{survivors} process(es) started during verification outlived tests/test.sh",
                )
            ]
        return []


def build(options: ProcessReaperOptions, ctx: BuildContext) -> ProcessReaper:
    """No agent process survives into the verifier; none may outlive test.sh."""
    return ProcessReaper()


def register(register: Any) -> None:
    register("process-reaper", build, options=ProcessReaperOptions)
