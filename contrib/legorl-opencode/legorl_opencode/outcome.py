"""Turn what ``opencode run --format json`` printed (one JSON event per line) into a HarnessResult.

Events (each with ``type``, ``timestamp``, ``sessionID``): ``step_start``, ``text``,
``reasoning`` and ``tool_use`` (a ``part``: the text, or the tool call with its ``state``:
``status`` completed|error, ``input``, ``output``), ``step_finish`` (``part.reason``: stop,
length, tool-calls, ...; ``part.tokens``) and ``error`` (``error.name``, ``error.data.message``)
when the session failed, after which OpenCode exits with 1. A run ends when a step finishes
with another reason than tool-calls.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lego_rl import harness_kit as kit
from lego_rl.data import Termination
from lego_rl.harness_kit import TAIL
from lego_rl.kinds import ExecResult, HarnessResult

ERRORS: dict[str, Termination] = {
    "ContextOverflowError": Termination.CONTEXT_OVERFLOW,
    "ProviderAuthError": Termination.API_ERROR,
    "ContentFilterError": Termination.API_ERROR,
}
"""OpenCode's session error names -> ours; an ``APIError`` is read from its message, any other
(``UnknownError``, ``MessageAbortedError``, ...) is a harness crash."""
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
"""Terminal colour codes, which OpenCode prints on stderr even when it is not a terminal."""


def classify(execution: ExecResult, events: list[dict[str, Any]]) -> HarnessResult:
    """The termination of one run, with a reason a person can act on."""
    steps = [e["part"] for e in events if e.get("type") == "step_finish" and isinstance(e.get("part"), dict)]
    details: dict[str, Any] = {
        "steps": len(steps),
        "tool_calls": sum(1 for e in events if e.get("type") == "tool_use"),
    }
    if steps:
        details["finish"] = steps[-1].get("reason")
    session = next((e.get("sessionID") for e in events if e.get("sessionID")), None)
    if session:
        details["session_id"] = session
    result = kit.outcome(execution, details)
    if (late := kit.timed_out("OpenCode", execution, result)) is not None:
        return late
    errors = [e.get("error") or {} for e in events if e.get("type") == "error"]
    if errors:
        return _failed(errors[-1], result)
    if execution.exit_code == 0 and steps:
        return result(Termination.COMPLETED, f"OpenCode finished ({details['finish']})")
    what = f"OpenCode exited with code {execution.exit_code} before a step finished"
    return result(Termination.HARNESS_CRASH, ANSI.sub("", kit.crash_reason(what, execution)))


def _failed(error: dict[str, Any], result: kit.Outcome) -> HarnessResult:
    """The result of a run that ended in a session ``error`` event."""
    name = str(error.get("name", "UnknownError"))
    data = error.get("data")
    if not isinstance(data, dict):
        data = {}
    message = str(data.get("message", ""))[-TAIL:]
    if name == "APIError":
        status = data.get("statusCode")
        prefix = f"model API error {status}: " if status else "model API error: "
        return result(kit.api_failure(message), prefix + message)
    termination = ERRORS.get(name)
    if termination is not None:
        return result(termination, f"{name}: {message}")
    return result(Termination.HARNESS_CRASH, f"OpenCode failed ({name}): {message}")


def render_transcript(events: list[dict[str, Any]]) -> str:
    """A readable transcript: text, reasoning, tool calls (bash as shell commands) with their
    output, step ends and errors."""
    blocks = []
    for event in events:
        kind, part = event.get("type"), event.get("part") or {}
        if kind == "text":
            blocks.append(f"[assistant]\n{part.get('text', '')}")
        elif kind == "reasoning":
            blocks.append(f"[thinking]\n{part.get('text', '')}")
        elif kind == "tool_use":
            blocks.append(_tool(part))
        elif kind == "step_finish" and part.get("reason") != "tool-calls":
            blocks.append(f"[finish] {part.get('reason', '')}")
        elif kind == "error":
            error = event.get("error") or {}
            blocks.append(f"[error] {error.get('name', '')}: {(error.get('data') or {}).get('message', '')}")
    return "\n\n".join(b for b in blocks if b)


def _tool(part: dict[str, Any]) -> str:
    state = part.get("state") or {}
    arguments = state.get("input") or {}
    if part.get("tool") == "bash" and "command" in arguments:
        call = f"$ {arguments['command']}"
    else:
        call = f"[tool {part.get('tool')}] {json.dumps(arguments, ensure_ascii=False)}"
    output = state.get("output") if state.get("status") == "completed" else f"[error] {state.get('error', '')}"
    return f"{call}\n{str(output or '')[-TAIL:]}".rstrip()
