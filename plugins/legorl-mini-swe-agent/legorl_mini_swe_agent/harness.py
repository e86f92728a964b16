"""The mini-swe-agent harness: its unmodified ``mini`` CLI run inside the sandbox.

One run writes a config file (model pointed at the proxy, step limit, the task) into
``/logs/agent``, starts ``mini`` there with the local environment working in the task
repository, and reads back the trajectory file it saves after every step.
"""

from __future__ import annotations

import importlib.metadata
import json
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from lego_rl.data import Termination
from lego_rl.kinds import Endpoint, HarnessResult, Problem, Sandbox, Task
from lego_rl.registry import BuildContext

from legorl_mini_swe_agent.config import build_config
from legorl_mini_swe_agent.options import MiniSweAgentOptions
from legorl_mini_swe_agent.outcome import classify, render_transcript

VERSION = "2.4.6"
LOGS = "/logs/agent"
CONFIG_FILE = f"{LOGS}/mini-swe-agent.yaml"
TRAJECTORY_FILE = f"{LOGS}/mini-swe-agent.traj.json"
INSTALL = (
    f"pip install mini-swe-agent=={VERSION} into this environment (the project's setup: "
    "pip install -e plugins/legorl-mini-swe-agent), or set harness.options.command to its "
    "`mini` executable"
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
        if self.options.max_turns is not None:
            return self.options.max_turns
        return self.ctx.spec.run.max_turns if self.ctx.spec is not None else 8

    def command_path(self) -> Path | None:
        """The absolute path of the `mini` executable, or None if it is not there."""
        raw = self.options.command
        if raw is None:
            path = Path(sys.executable).parent / "mini"
        elif "/" in raw:
            path = self.ctx.path(raw)
        else:
            found = shutil.which(raw)
            path = Path(found) if found else Path(raw)
        return path if path.is_file() else None

    def preflight(self) -> list[Problem]:
        if self.command_path() is None:
            where = self.options.command or str(Path(sys.executable).parent / "mini")
            return [Problem(f"mini-swe-agent CLI not found: {where}", INSTALL)]
        if self.options.command is None:
            try:
                installed = importlib.metadata.version("mini-swe-agent")
            except importlib.metadata.PackageNotFoundError:
                installed = "unknown"
            if installed != VERSION:
                return [
                    Problem(
                        f"mini-swe-agent {installed} is installed; this plugin is tested with {VERSION}",
                        f"pip install mini-swe-agent=={VERSION}",
                        fatal=False,
                    )
                ]
        return []

    def conformance_script(self, commands: list[str]) -> list[dict[str, Any]]:
        """The policy turns that run each shell command with the ``bash`` tool, then submit."""
        return [
            {"text": "", "tool_calls": [{"name": "bash", "arguments": {"command": c}}]}
            for c in [*commands, f"echo {SUBMIT}"]
        ]

    def run(self, sandbox: Sandbox, task: Task, endpoint: Endpoint, timeout: float) -> HarnessResult:
        timeout = self.options.timeout or timeout
        mini = self.command_path()
        if mini is None:
            missing = f"mini-swe-agent CLI not found ({INSTALL})"
            return HarnessResult(Termination.HARNESS_CRASH, reason=missing)
        config = build_config(
            self.options, endpoint, task.instruction, sandbox.workdir, timeout, self.max_turns
        )
        with tempfile.TemporaryDirectory(prefix="legorl-mini-") as tmp:
            local = Path(tmp)
            prepared = sandbox.exec(f"mkdir -p {LOGS} && rm -f {TRAJECTORY_FILE}", timeout=30)
            if prepared.exit_code != 0:
                return HarnessResult(
                    Termination.SANDBOX_ERROR, prepared.exit_code, f"cannot create {LOGS}: {prepared.stderr}"
                )
            (local / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
            sandbox.upload(local / "config.yaml", CONFIG_FILE)
            started = time.monotonic()
            execution = sandbox.exec(
                self._command_line(mini),
                timeout=timeout,
                env={**ENV, **self._retry_env(), **self.options.extra_env},
                cwd=LOGS,
            )
            trajectory = _download_json(sandbox, TRAJECTORY_FILE, local / "trajectory.json")
        result = classify(execution, trajectory)
        result.transcript = render_transcript(trajectory)
        result.details["seconds"] = round(time.monotonic() - started, 3)
        return result

    def _retry_env(self) -> dict[str, str]:
        """mini retries a failed call itself (tenacity, >= 4 s apart); litellm's retries are off."""
        return {"MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": str(1 + self.options.retries)}

    @staticmethod
    def _command_line(mini: Path) -> str:
        """mini's base config by name (resolved in its package: cwd is /logs/agent), then ours."""
        return " ".join(
            shlex.quote(part)
            for part in (str(mini), "-c", "mini.yaml", "-c", CONFIG_FILE, "-o", TRAJECTORY_FILE)
        ) + " </dev/null"


def _download_json(sandbox: Sandbox, src: str, dst: Path) -> dict[str, Any] | None:
    """The JSON file at src inside the sandbox, or None if it is missing or unreadable."""
    try:
        sandbox.download(src, dst)
        data = json.loads(dst.read_text())
    except Exception:  # a missing file raises whatever the sandbox backend raises
        return None
    return data if isinstance(data, dict) else None
