"""Turn what mini-swe-agent left behind (exit code, trajectory file) into a HarnessResult."""

from __future__ import annotations

import json
from typing import Any

from lego_rl import harness_kit as kit
from lego_rl.data import Termination
from lego_rl.harness_kit import TAIL
from lego_rl.kinds import ExecResult, HarnessResult

EXIT_STATUSES: dict[str, Termination] = {
    "Submitted": Termination.COMPLETED,
    "LimitsExceeded": Termination.MAX_TURNS,
    "RepeatedFormatError": Termination.MAX_TURNS,
    "TimeExceeded": Termination.AGENT_TIMEOUT,
}
"""mini-swe-agent's own exit statuses (``info.exit_status`` of its trajectory)."""


def classify(execution: ExecResult, trajectory: dict[str, Any] | None) -> HarnessResult:
    """The termination of one run, with a reason a person can act on."""
    info = (trajectory or {}).get("info", {})
    status = str(info.get("exit_status", ""))
    last = _last_message(trajectory)
    error = str(last.get("extra", {}).get("exception_str", "") or "")
    details = {"exit_status": status, "api_calls": info.get("model_stats", {}).get("api_calls", 0)}
    result = kit.outcome(execution, details)
    if (late := kit.timed_out("mini-swe-agent", execution, result)) is not None:
        return late
    if status in EXIT_STATUSES:
        return result(EXIT_STATUSES[status], f"mini-swe-agent exit status {status}")
    if _is_model_api_error(status, error):
        return result(kit.api_failure(f"{status} {error}"), f"model API error {status}: {error[-TAIL:]}")
    what = f"exit status {status!r}: {error[-TAIL:]}" if status else f"exit code {execution.exit_code}"
    return result(Termination.HARNESS_CRASH, kit.crash_reason(f"mini-swe-agent ended with {what}", execution))


def _is_model_api_error(status: str, error: str) -> bool:
    """litellm raises its own exception types, each message starting with ``litellm.``."""
    return error.startswith("litellm.") or status in {"APIConnectionError", "Timeout"}


def _last_message(trajectory: dict[str, Any] | None) -> dict[str, Any]:
    messages = (trajectory or {}).get("messages") or [{}]
    return messages[-1] if isinstance(messages[-1], dict) else {}


def render_transcript(trajectory: dict[str, Any] | None) -> str:
    """A readable transcript: one block per message, tool calls shown as shell commands."""
    blocks = []
    for message in (trajectory or {}).get("messages", []):
        role = message.get("role", "?")
        content = message.get("content") or ""
        if not isinstance(content, str):
            content = str(content)
        if role == "exit":
            content = f"{message.get('extra', {}).get('exit_status', '')} {content}".strip()
        lines = [f"[{role}]", content] if content else [f"[{role}]"]
        for call in message.get("tool_calls") or []:
            lines.append(f"$ {_command(call)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _command(call: dict[str, Any]) -> str:
    arguments = call.get("function", {}).get("arguments", "")
    try:
        return str(json.loads(arguments).get("command", arguments))
    except (ValueError, AttributeError):
        return str(arguments)
