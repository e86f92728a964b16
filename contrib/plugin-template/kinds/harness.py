"""The {{name}} harness: an agent CLI run unmodified inside the sandbox.

Fill in LAUNCH (or set ``harness.options.command`` in a spec) and ``SHELL_TOOL``; until then
the preflight says so and the behavioural contracts fail naming it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lego_rl import harness_kit as kit
from lego_rl import hookimpl
from lego_rl.data import Termination
from lego_rl.kinds import Endpoint, HarnessResult, Problem, Sandbox, Task
from lego_rl.registry import BuildContext

LAUNCH: str | None = None
"""TODO: the shell command that runs the agent non-interactively on one task, from the task's
working directory, e.g. ``'my-agent run --yes "$(cat $LEGORL_INSTRUCTION_FILE)"'``. It finds
the model API in OPENAI_BASE_URL / OPENAI_API_KEY / OPENAI_MODEL (the proxy session)."""
SHELL_TOOL = ("bash", "command")
"""TODO: the agent's tool that runs a shell command, and that tool's argument for it: the
conformance contracts answer the agent's model calls with calls of this tool."""
INSTRUCTION_FILE = f"{kit.LOGS}/instruction.md"
OUTPUT_FILE = f"{kit.LOGS}/{{name}}.log"


class {{Class}}Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    """The launch command; default: LAUNCH."""
    extra_env: dict[str, str] = Field(default_factory=dict)
    """More environment variables for the agent process."""


class {{Class}}:
    """The {{name}} agent CLI, unmodified, against the proxy's OpenAI chat API."""

    dialect = "openai-chat"

    def __init__(self, options: {{Class}}Options, ctx: BuildContext) -> None:
        self.options = options
        self.ctx = ctx

    @property
    def launch(self) -> str | None:
        return self.options.command or LAUNCH

    def preflight(self) -> list[Problem]:
        if not self.launch:
            return [
                Problem(
                    "{{name}}: no launch command",
                    "set LAUNCH in {{package}}/plugin.py (or harness.options.command in the spec) "
                    "to the command that runs the agent non-interactively",
                )
            ]
        return []

    def conformance_script(self, commands: list[str]) -> list[dict[str, Any]]:
        """Policy turns that run each command with the agent's shell tool, then finish."""
        return kit.command_turns(*SHELL_TOOL, commands)

    def run(self, sandbox: Sandbox, task: Task, endpoint: Endpoint, timeout: float) -> HarnessResult:
        if not self.launch:
            return HarnessResult(Termination.HARNESS_CRASH, reason=str(self.preflight()[0]))
        if (failed := kit.prepare(sandbox, kit.LOGS, OUTPUT_FILE)) is not None:
            return failed
        execution, output, started = kit.run_cli(
            sandbox, f"{self.launch} >{OUTPUT_FILE} 2>&1", OUTPUT_FILE, {INSTRUCTION_FILE: task.instruction},
            timeout=timeout, env={**self.model_env(endpoint), **self.options.extra_env}, cwd=sandbox.workdir,
        )  # fmt: skip
        result = kit.outcome(execution, {})
        if (late := kit.timed_out("{{name}}", execution, result)) is not None:
            return kit.finished(late, output, started)
        if execution.exit_code != 0:
            crashed = result(Termination.HARNESS_CRASH, kit.crash_reason(f"{{name}} exited {execution.exit_code}", execution))
            return kit.finished(crashed, output, started)
        return kit.finished(result(Termination.COMPLETED, "{{name}} finished"), output, started)

    @staticmethod
    def model_env(endpoint: Endpoint) -> dict[str, str]:
        """The proxy session as the OpenAI-compatible API the agent talks to."""
        return {
            "OPENAI_BASE_URL": endpoint.base_url.rstrip("/") + "/v1",
            "OPENAI_API_KEY": endpoint.api_key,
            "OPENAI_MODEL": endpoint.model,
            "LEGORL_INSTRUCTION_FILE": INSTRUCTION_FILE,
        }

    # Optional capabilities (lego_rl.kinds; CONTRIBUTING.md "Optional capabilities").
    # conformance_script above is ScriptsConformance (the contracts and the warm start use it);
    # the class attribute dialect makes the class SpeaksDialect (legorl validate checks the spec).
    #
    # HarnessFiles: host files the CLI runs from inside the sandbox (its venv, its runtime).
    # def sandbox_files(self) -> list[Path]:
    #     return kit.venv_files(Path(sys.prefix))


@hookimpl
def legorl_register_harness(register) -> None:
    register("{{name}}", {{Class}}, options={{Class}}Options)
