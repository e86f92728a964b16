"""Harness ``scripted``: runs fixed shell commands in the sandbox, then claims success.

No model and no proxy calls: the red-team suite uses it to play an attacker (one attack's
commands), and tests use it to play an oracle. Each command gets what is left of the
agent timeout; the run ends ``agent_timeout`` when that runs out, else ``completed``
whatever the commands' exit codes (a cheating agent claims success regardless).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lego_rl import hookimpl
from lego_rl.data import Termination
from lego_rl.kinds import Endpoint, HarnessResult, Problem, Sandbox, Task
from lego_rl.registry import BuildContext


class ScriptedHarnessOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    commands: list[str] = Field(default_factory=list, description="Shell commands run in order in the workdir.")
    uploads: dict[str, str] = Field(
        default_factory=dict, description="Host path -> in-sandbox path, uploaded before the commands."
    )


class ScriptedHarness:
    dialect = "openai-chat"

    def __init__(self, commands: list[str], uploads: dict[str, str] | None = None):
        self.commands = commands
        self.uploads = uploads or {}

    def preflight(self) -> list[Problem]:
        return []

    def run(self, sandbox: Sandbox, task: Task, endpoint: Endpoint, timeout: float) -> HarnessResult:
        deadline = time.monotonic() + timeout
        for src, dst in self.uploads.items():
            sandbox.upload(Path(src), dst)
        lines: list[str] = []
        for command in self.commands:
            left = deadline - time.monotonic()
            if left <= 0:
                return _result(Termination.AGENT_TIMEOUT, lines, "the agent timeout ran out")
            out = sandbox.exec(command, timeout=left)
            lines.append(f"$ {command}\n[exit {out.exit_code}]\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
            if out.timed_out:
                return _result(Termination.AGENT_TIMEOUT, lines, f"command ran past the agent timeout ({timeout:g}s)")
        return _result(Termination.COMPLETED, lines, "")


def _result(termination: Termination, lines: list[str], reason: str) -> HarnessResult:
    return HarnessResult(termination, exit_code=0, reason=reason, transcript="\n".join(lines))


def build(options: ScriptedHarnessOptions, ctx: BuildContext) -> ScriptedHarness:
    """Fixed shell commands, then a claim of success (red-team attacks, oracles, tests)."""
    return ScriptedHarness(options.commands, options.uploads)


@hookimpl
def legorl_register_harness(register: Any) -> None:
    register("scripted", build, options=ScriptedHarnessOptions)
