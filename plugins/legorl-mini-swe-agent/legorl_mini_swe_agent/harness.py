"""The mini-swe-agent harness: its unmodified ``mini`` CLI run inside the sandbox.

One run writes a config file (model pointed at the proxy, step limit, the task) into
``/logs/agent``, starts ``mini`` there with the local environment working in the task
repository, and reads back the trajectory file it saves after every step.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from lego_rl import harness_kit as kit
from lego_rl.kinds import Endpoint, HarnessResult, Problem, Sandbox, Task
from lego_rl.registry import BuildContext
from legorl_mini_swe_agent.config import build_config
from legorl_mini_swe_agent.options import MiniSweAgentOptions
from legorl_mini_swe_agent.outcome import classify, render_transcript

VERSION = "2.4.6"
LOGS = kit.LOGS
CONFIG_FILE = f"{LOGS}/mini-swe-agent.yaml"
TRAJECTORY_FILE = f"{LOGS}/mini-swe-agent.traj.json"
DIST_DIR = Path(__file__).resolve().parents[1]
VENV = DIST_DIR / ".venv"
MINI = VENV / "bin" / "mini"
"""The `mini` executable of the distribution's own virtualenv (a sandbox shows the harness's
files to the agent: its own environment, never lego-rl's)."""
INSTALL = (
    f"create {VENV} and install the pinned CLI: python3.12 -m venv {VENV} && "
    f"{VENV}/bin/pip install -r {DIST_DIR}/requirements.txt (scripts/setup.sh), "
    "or set harness.options.command to a `mini` executable"
)
SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
"""What a command prints first to end the run (mini-swe-agent's submission)."""
ENV = {
    "MSWEA_CONFIGURED": "true",
    "MSWEA_COST_TRACKING": "ignore_errors",
    "MSWEA_SILENT_STARTUP": "1",
    "MSWEA_GLOBAL_CONFIG_DIR": f"{LOGS}/mini-swe-agent-home",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "TYPER_STANDARD_TRACEBACK": "1",
}
"""No first-run wizard, no price list from the internet, config dir in writable /logs,
plain tracebacks (its rich ones take seconds to render)."""


class MiniSweAgent:
    """mini-swe-agent (the `mini` CLI, tool-calling mode) against the proxy's OpenAI chat API."""

    dialect = "openai-chat"

    def __init__(self, options: MiniSweAgentOptions, ctx: BuildContext | None = None):
        self.options = options
        self.ctx = ctx or BuildContext()

    @property
    def max_turns(self) -> int:
        """The option, else the spec's ``run.max_turns``."""
        return kit.max_turns(self.options.max_turns, self.ctx)

    def command_path(self) -> Path | None:
        """The absolute path of the `mini` executable, or None if it is not there."""
        return kit.find_cli(self.options.command, MINI, self.ctx)

    def sandbox_files(self) -> list[Path]:
        """The virtualenv of the `mini` CLI and the Python it links to."""
        mini = self.command_path()
        return kit.venv_files(mini.parent.parent) if mini else []

    def preflight(self) -> list[Problem]:
        if self.command_path() is None:
            return [kit.cli_missing("mini-swe-agent", self.options.command, MINI, INSTALL)]
        if self.options.command is None:
            installed = kit.venv_version(VENV, "mini-swe-agent")
            return kit.untested_version("mini-swe-agent", installed, VERSION, f"pip install mini-swe-agent=={VERSION}")
        return []

    def conformance_script(self, commands: list[str]) -> list[dict[str, Any]]:
        """The policy turns that run each shell command with the ``bash`` tool, then submit."""
        return kit.command_turns("bash", "command", [*commands, f"echo {SUBMIT}"], finish=False)

    def run(self, sandbox: Sandbox, task: Task, endpoint: Endpoint, timeout: float) -> HarnessResult:
        timeout = self.options.timeout or timeout
        mini = self.command_path()
        if mini is None:
            return kit.not_found("mini-swe-agent", INSTALL)
        if (failed := kit.prepare(sandbox, LOGS, TRAJECTORY_FILE)) is not None:
            return failed
        config = build_config(
            self.options, endpoint, task.instruction, sandbox.workdir, timeout, self.max_turns
        )
        execution, output, started = kit.run_cli(
            sandbox, self._command_line(mini), TRAJECTORY_FILE, {CONFIG_FILE: yaml.safe_dump(config, sort_keys=False)},
            timeout=timeout,
            env={**ENV, **self._retry_env(), **self.options.extra_env},
            cwd=LOGS,
        )
        trajectory = kit.json_object(output)
        return kit.finished(classify(execution, trajectory), render_transcript(trajectory), started)

    def _retry_env(self) -> dict[str, str]:
        """mini retries a failed call itself (tenacity, >= 4 s apart); litellm's retries are off."""
        return {"MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": str(1 + self.options.retries)}

    @staticmethod
    def _command_line(mini: Path) -> str:
        """mini's base config by name (resolved in its package: cwd is /logs/agent), then ours."""
        return shlex.join([str(mini), "-c", "mini.yaml", "-c", CONFIG_FILE, "-o", TRAJECTORY_FILE]) + " </dev/null"

