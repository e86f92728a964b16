"""The OpenHands harness: its unmodified CLI (``openhands --headless --json``) run inside the sandbox.

OpenHands pins dependencies the project cannot share (and brings ~800 MB of them), so it lives
in this distribution's own virtualenv, ``.venv`` beside ``pyproject.toml``, installed from
``requirements.txt``. One run writes the agent settings (model on the proxy session, no
retries; see :mod:`legorl_openhands.settings`) into its own persistence dir under
``/logs/agent``, starts the CLI in the task repository with the instruction as its task, and
reads back the JSONL events it printed. Its tools run in the CLI's own process environment
(a local terminal, tmux where there is one); no Docker. The CLI has no turn limit of its own
(500 iterations): the proxy session's call limit (the spec's ``run.max_turns``) ends a run
that goes on too long.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from lego_rl import harness_kit as kit
from lego_rl.kinds import Endpoint, HarnessResult, Problem, Sandbox, Task
from lego_rl.registry import BuildContext
from legorl_openhands.options import OpenHandsOptions
from legorl_openhands.outcome import classify, render_transcript
from legorl_openhands.settings import build_settings

VERSION = "1.16.0"
DIST_DIR = Path(__file__).resolve().parents[1]
VENV = DIST_DIR / ".venv"
OPENHANDS = VENV / "bin" / "openhands"
"""The `openhands` executable of the distribution's own virtualenv."""
INSTALL = (
    f"create {VENV} and install the pinned CLI: python3.12 -m venv {VENV} && "
    f"{VENV}/bin/pip install -r {DIST_DIR}/requirements.txt (scripts/setup.sh), "
    "or set harness.options.command to an `openhands` executable"
)
LOGS = kit.LOGS
HOME = f"{LOGS}/openhands"
"""OPENHANDS_PERSISTENCE_DIR: agent_settings.json and the saved conversation."""
SETTINGS_FILE = f"{HOME}/agent_settings.json"
INSTRUCTION_FILE = f"{LOGS}/instruction.md"
EVENTS_FILE = f"{LOGS}/openhands.jsonl"
SECURITY_RISK = "LOW"
"""OpenHands' tools require a ``security_risk`` argument (its LLM security analyzer is on)."""
ENV = {
    "OPENHANDS_PERSISTENCE_DIR": HOME,
    "OPENHANDS_SUPPRESS_BANNER": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
}
"""Settings and conversation under /logs, no banner, no price list from the internet."""


class OpenHands:
    """OpenHands (the CLI, headless, native tool calls) against the proxy's OpenAI chat API."""

    dialect = "openai-chat"

    def __init__(self, options: OpenHandsOptions, ctx: BuildContext | None = None):
        self.options = options
        self.ctx = ctx or BuildContext()

    def command_path(self) -> Path | None:
        """The absolute path of the `openhands` executable, or None if it is not there."""
        return kit.find_cli(self.options.command, OPENHANDS, self.ctx)

    def sandbox_files(self) -> list[Path]:
        """The CLI's virtualenv and the Python it links to."""
        openhands = self.command_path()
        return kit.venv_files(openhands.parent.parent) if openhands else []

    def preflight(self) -> list[Problem]:
        if self.command_path() is None:
            return [kit.cli_missing("OpenHands", self.options.command, OPENHANDS, INSTALL)]
        if self.options.command is None:
            return kit.untested_version("OpenHands", kit.venv_version(VENV, "openhands"), VERSION, INSTALL)
        return []

    def conformance_script(self, commands: list[str]) -> list[dict[str, Any]]:
        """The policy turns that run each shell command with the ``terminal`` tool, then answer."""
        turns = kit.command_turns("terminal", "command", commands)
        for turn in turns:
            for call in turn.get("tool_calls", []):
                call["arguments"]["security_risk"] = SECURITY_RISK
        return turns

    def run(self, sandbox: Sandbox, task: Task, endpoint: Endpoint, timeout: float) -> HarnessResult:
        timeout = self.options.timeout or timeout
        openhands = self.command_path()
        if openhands is None:
            return kit.not_found("OpenHands", INSTALL)
        if (failed := kit.prepare(sandbox, HOME, EVENTS_FILE)) is not None:
            return failed
        settings = build_settings(self.options, endpoint, timeout)
        execution, output, started = kit.run_cli(
            sandbox, command_line(openhands), EVENTS_FILE,
            {SETTINGS_FILE: json.dumps(settings), INSTRUCTION_FILE: task.instruction},
            timeout=timeout,
            env={**ENV, "OPENHANDS_WORK_DIR": sandbox.workdir, **self.options.extra_env},
            cwd=sandbox.workdir,
        )
        events = kit.json_lines(output)
        return kit.finished(classify(execution, events), render_transcript(events), started)


def command_line(openhands: Path) -> str:
    """Headless (always approve), JSONL events on stdout into the events file, no stdin."""
    task = f'"$(cat {INSTRUCTION_FILE})"'
    return f"{shlex.quote(str(openhands))} --headless --json -t {task} </dev/null >{EVENTS_FILE}"


