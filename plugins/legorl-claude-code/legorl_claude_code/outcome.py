"""Turn Claude Code's ``--output-format stream-json`` output into a HarnessResult.

Every line is one JSON event: ``system`` (init), ``assistant`` / ``user`` (one content block
each), and a final ``result`` that says how the run ended (``subtype``, ``is_error``,
``terminal_reason``, ``api_error``, ``api_error_status``, ``num_turns``). A reply cut at the
per-call token limit is continued up to a few times, then ends the run with ``api_error:
max_output_tokens``; that is the policy's doing, mapped to ``output_limit`` rather than to an
API failure.
"""

from __future__ import annotations

import json
from typing import Any

from lego_rl import harness_kit as kit
from lego_rl.data import Termination
from lego_rl.harness_kit import TAIL
from lego_rl.kinds import ExecResult, HarnessResult

TERMINAL_REASONS: dict[str, Termination] = {
    "max_turns": Termination.MAX_TURNS,
    "prompt_too_long": Termination.CONTEXT_OVERFLOW,
    "api_error": Termination.API_ERROR,
}
"""Claude Code's ``terminal_reason`` of a failed run -> ours."""


def classify(execution: ExecResult, events: list[dict[str, Any]]) -> HarnessResult:
    """The termination of one run, with a reason a person can act on."""
    final = next((e for e in reversed(events) if e.get("type") == "result"), None)
    details: dict[str, Any] = {}
    if final is not None:
        keys = ("subtype", "terminal_reason", "num_turns", "session_id", "api_error_status")
        details = {k: final[k] for k in keys if k in final}
    result = kit.outcome(execution, details)
    if (late := kit.timed_out("Claude Code", execution, result)) is not None:
        return late
    if final is None:
        what = f"Claude Code exited with code {execution.exit_code} without a result event"
        return result(Termination.HARNESS_CRASH, kit.crash_reason(what, execution))
    message = str(final.get("result") or "; ".join(map(str, final.get("errors") or [])))[-TAIL:]
    if final.get("subtype") == "error_max_turns":
        return result(Termination.MAX_TURNS, message or "Claude Code reached --max-turns")
    if not final.get("is_error"):
        return result(Termination.COMPLETED, f"Claude Code finished ({final.get('stop_reason', '')})")
    if final.get("api_error") == "max_output_tokens":
        # The policy's replies kept stopping at the per-call token limit: its own doing.
        return result(Termination.OUTPUT_LIMIT, f"replies hit the output token limit: {message}")
    termination = TERMINAL_REASONS.get(str(final.get("terminal_reason", "")))
    if termination is None and final.get("api_error_status"):
        termination = Termination.API_ERROR
    if termination is not None:
        status = final.get("api_error_status")
        prefix = f"model API error {status}: " if status else ""
        return result(termination, prefix + message)
    return result(Termination.HARNESS_CRASH, f"Claude Code failed ({final.get('subtype')}): {message}")


def render_transcript(events: list[dict[str, Any]]) -> str:
    """A readable transcript: text, tool calls (Bash as shell commands), tool results, result."""
    blocks = []
    for event in events:
        kind = event.get("type")
        if kind in ("assistant", "user"):
            content = event.get("message", {}).get("content") or []
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            blocks += [_block(kind, part) for part in content if isinstance(part, dict)]
        elif kind == "result":
            blocks.append(f"[result] {event.get('subtype', '')}\n{event.get('result', '')}".strip())
    return "\n\n".join(b for b in blocks if b)


def _block(role: str, part: dict[str, Any]) -> str:
    kind = part.get("type")
    if kind == "text":
        return f"[{role}]\n{part.get('text', '')}"
    if kind == "thinking":
        return f"[thinking]\n{part.get('thinking', '')}"
    if kind == "tool_use":
        arguments = part.get("input") or {}
        if part.get("name") == "Bash" and "command" in arguments:
            return f"$ {arguments['command']}"
        return f"[tool {part.get('name')}] {json.dumps(arguments, ensure_ascii=False)}"
    if kind == "tool_result":
        output = part.get("content", "")
        if isinstance(output, list):
            output = "\n".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
        return f"[tool result]\n{str(output)[-TAIL:]}"
    return ""
