"""Turn what the OpenHands CLI left behind (exit code, its ``--json`` event stream) into a
HarnessResult.

The CLI exits 0 whatever happened; the stream tells: a ``ConversationErrorEvent`` ends a run
that failed, an agent message (or the ``finish`` tool) one that completed. A run that stops
after an observation was stopped by OpenHands' stuck detector (the same action over and over).
"""

from __future__ import annotations

import json
from typing import Any

from lego_rl import harness_kit as kit
from lego_rl.data import Termination
from lego_rl.harness_kit import TAIL
from lego_rl.kinds import ExecResult, HarnessResult

NAME = "OpenHands"
API_ERRORS = frozenset({
    "LLMAuthenticationError", "LLMBadRequestError", "LLMNoResponseError", "LLMRateLimitError",
    "LLMResponseError", "LLMServiceUnavailableError", "LLMTimeoutError",
})  # fmt: skip
"""Error codes (the SDK's exception names) of a model call that failed."""
CONTEXT_ERRORS = frozenset({"LLMContextWindowExceedError", "LLMContextWindowTooSmallError"})
MAX_ITERATIONS = "MaxIterationsReached"


def classify(execution: ExecResult, events: list[dict[str, Any]]) -> HarnessResult:
    """The termination of one run, with a reason a person can act on."""
    error = _conversation_error(events)
    code, detail = (str(error.get("code", "")), str(error.get("detail", ""))) if error else ("", "")
    details = {"error_code": code, "model_calls": _model_calls(events), "commands": len(_terminal_actions(events))}
    result = kit.outcome(execution, details)
    if (late := kit.timed_out(NAME, execution, result)) is not None:
        return late
    if error is not None:
        return _failed(result, code, detail)
    if execution.exit_code != 0:
        return result(Termination.HARNESS_CRASH, kit.crash_reason(f"{NAME} exited with {execution.exit_code}", execution))
    if _finished(events):
        return result(Termination.COMPLETED, f"{NAME} finished")
    if any(e.get("source") == "agent" for e in events):
        return result(Termination.MAX_TURNS, f"{NAME} stopped without finishing (its stuck detector: a repeated action)")
    return result(Termination.HARNESS_CRASH, kit.crash_reason(f"{NAME} ended without an agent event", execution))


def _failed(result: kit.Outcome, code: str, detail: str) -> HarnessResult:
    said = f"{code}: {detail[-TAIL:]}"
    if code == MAX_ITERATIONS:
        return result(Termination.MAX_TURNS, f"{NAME} {said}")
    if code in CONTEXT_ERRORS:
        return result(Termination.CONTEXT_OVERFLOW, f"model API error {said}")
    if code in API_ERRORS or detail.startswith("litellm."):
        return result(kit.api_failure(f"{code} {detail}"), f"model API error {said}")
    return result(Termination.HARNESS_CRASH, f"{NAME} failed with {said}")


def _conversation_error(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    errors = [e for e in events if e.get("kind") == "ConversationErrorEvent"]
    return errors[-1] if errors else None


def _finished(events: list[dict[str, Any]]) -> bool:
    """The agent's last event is a message to the user, or its ``finish`` tool call."""
    agent = [e for e in events if e.get("source") == "agent"]
    if not agent:
        return False
    last = agent[-1]
    return last.get("kind") == "MessageEvent" or (last.get("kind") == "ActionEvent" and last.get("tool_name") == "finish")


def _model_calls(events: list[dict[str, Any]]) -> int:
    """Distinct model responses the agent acted on."""
    return len({e["llm_response_id"] for e in events if e.get("source") == "agent" and e.get("llm_response_id")})


def _terminal_actions(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("kind") == "ActionEvent" and e.get("tool_name") == "terminal"]


def render_transcript(events: list[dict[str, Any]]) -> str:
    """A readable transcript: one block per event, terminal commands shown as shell commands."""
    blocks = [block for event in events if (block := _render(event))]
    return "\n\n".join(blocks)


def _render(event: dict[str, Any]) -> str:
    kind = event.get("kind")
    if kind == "MessageEvent":
        message = event.get("llm_message") or {}
        return f"[{message.get('role', event.get('source', '?'))}]\n{_text(message.get('content'))}".rstrip()
    if kind == "ActionEvent":
        thought = _text(event.get("thought"))
        lines = ["[assistant]", thought] if thought else ["[assistant]"]
        action = event.get("action") or {}
        if event.get("tool_name") == "terminal" and "command" in action:
            lines.append(f"$ {action['command']}")
        else:
            lines.append(f"[{event.get('tool_name', '?')}] {_arguments(event)}")
        return "\n".join(lines)
    if kind == "ObservationEvent":
        observation = event.get("observation") or {}
        return f"[tool {event.get('tool_name', '?')}]\n{_text(observation.get('content'))[-TAIL:]}".rstrip()
    if kind == "AgentErrorEvent":
        return f"[error]\n{event.get('error', '')}"
    if kind == "ConversationErrorEvent":
        return f"[error]\n{event.get('code', '')}: {event.get('detail', '')}"
    return ""


def _text(content: Any) -> str:
    """The text of a content field: a string, or a list of ``{"type": "text", "text": ...}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("text"))
    return ""


def _arguments(event: dict[str, Any]) -> str:
    call = event.get("tool_call") or {}
    arguments = call.get("arguments", "")
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(arguments)
