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
from typing import Any

from pydantic import BaseModel, ConfigDict

from lego_rl.data import TrialResult
from lego_rl.kinds import Sandbox, Task, Violation
from lego_rl.registry import BuildContext
from legorl_std.anticheat.common import run

_OTHERS = r"""n=0; for p in /proc/[0-9]*; do i=${p#/proc/}; [ "$i" = 1 ] || [ "$i" = $$ ] || n=$((n+1)); done
[ "$n" = 0 ] || kill -9 -1 2>/dev/null; echo $n"""


class ProcessReaperOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProcessReaper:
    name = "process-reaper"

    def before_agent(self, sandbox: Sandbox, task: Task) -> list[Violation]:
        return []

    def before_verify(self, sandbox: Sandbox, task: Task) -> list[Violation]:
        kill_all = getattr(sandbox, "kill_all", None)
        if callable(kill_all):
            kill_all()
        found: list[str] = []
        processes = getattr(sandbox, "processes", None)
        escaped = processes() if callable(processes) else []
        for pid in escaped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if escaped:
            found.append(f"{len(escaped)} process(es) of the trial's user outlived the agent phase")
        others = int(run(sandbox, _OTHERS).split()[-1])
        if others:
            found.append(f"{others} process(es) of the agent phase still ran in the sandbox")
        return [Violation(self.name, message) for message in found]

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
