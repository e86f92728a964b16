"""The {{name}} anti-cheat policy: flags Python start-up hooks planted in the working directory
(``sitecustomize.py``, ``usercustomize.py``, ``*.pth``), which could rewrite the tests' run."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from lego_rl import hookimpl
from lego_rl.data import TrialResult
from lego_rl.kinds import CheatDemo, Sandbox, Task, Violation
from lego_rl.registry import BuildContext


class {{Class}}Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    patterns: list[str] = Field(default_factory=lambda: ["sitecustomize.py", "usercustomize.py", "*.pth"])
    """File name patterns that must not appear under the working directory."""


class {{Class}}:
    """Flags start-up hook files under the working directory before the verifier runs."""

    name = "{{name}}"

    def __init__(self, options: {{Class}}Options, ctx: BuildContext) -> None:
        self.options = options

    def before_agent(self, sandbox: Sandbox, task: Task) -> list[Violation]:
        return []

    def before_verify(self, sandbox: Sandbox, task: Task) -> list[Violation]:
        names = " -o ".join(f"-name '{p}'" for p in self.options.patterns)
        found = sandbox.exec(f"find {sandbox.workdir} \\( {names} \\) -print", timeout=30).stdout.split()
        return [Violation(self.name, f"start-up hook planted: {path}") for path in found]

    def after(self, sandbox: Sandbox, task: Task, result: TrialResult) -> list[Violation]:
        return []

    def cheat_demonstration(self, scratch: Path) -> CheatDemo:
        """The cheat this policy catches, for its contract (DemonstratesCheat, required):
        ``stage`` plants it in the workdir, ``works`` exits 0 while it is there."""
        return CheatDemo("before_verify", stage="touch sitecustomize.py", works="test -e sitecustomize.py")

    # Optional capabilities (lego_rl.kinds): ChecksBeforeAgent / ChecksBeforeVerify, the
    # phase as one shell check that the engine batches with other policies' (one exec).
    # def before_agent_check(self, sandbox: Sandbox, task: Task) -> Check | None:
    #     return Check(self.name, "test -e /tmp/planted && echo planted", lambda out: [...])


@hookimpl
def legorl_register_anticheat(register) -> None:
    register("{{name}}", {{Class}}, options={{Class}}Options)
