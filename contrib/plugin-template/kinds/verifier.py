"""The {{name}} verifier: the task's own tests decide, reward 1 or 0."""

from __future__ import annotations

import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from lego_rl import hookimpl
from lego_rl.kinds import Sandbox, Task, VerifierResult
from lego_rl.registry import BuildContext


class {{Class}}Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timeout: float = Field(120.0, gt=0)
    """Seconds the tests may run."""


class {{Class}}:
    """Runs the task's tests/test.sh in the sandbox; reward 1 iff it wrote 1 to
    /logs/verifier/reward.txt (Harbor's convention)."""

    def __init__(self, options: {{Class}}Options, ctx: BuildContext) -> None:
        self.options = options

    def score(self, sandbox: Sandbox, task: Task) -> VerifierResult:
        sandbox.upload(task.path / "tests", "/tests")
        run = sandbox.exec("mkdir -p /logs/verifier && bash /tests/test.sh", timeout=self.options.timeout)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                sandbox.download("/logs/verifier/reward.txt", Path(tmp) / "reward.txt")
                written = (Path(tmp) / "reward.txt").read_text().strip()
            except Exception:  # noqa: BLE001 - no reward file: the tests did not pass
                written = ""
        reward = 1.0 if written == "1" else 0.0
        return VerifierResult(reward, details={"exit_code": run.exit_code, "timed_out": run.timed_out})

    # Optional capability (lego_rl.kinds): Preflights, prerequisites `legorl plan` shows.
    # def preflight(self) -> list[Problem]: ...


@hookimpl
def legorl_register_verifier(register) -> None:
    register("{{name}}", {{Class}}, options={{Class}}Options)
