"""Turn what ``codex exec --json`` printed (one JSON event per line) into a HarnessResult.

Events: ``thread.started``, ``turn.started``, ``item.started|updated|completed`` (items:
agent_message, reasoning, command_execution, file_change, error, ...), and one of
``turn.completed`` or ``turn.failed`` (``error.message``) at the end.
"""

from __future__ import annotations

import json
from typing import Any

from lego_rl import harness_kit as kit
from lego_rl.data import Termination
from lego_rl.harness_kit import TAIL
from lego_rl.kinds import ExecResult, HarnessResult


def classify(execution: ExecResult, events: list[dict[str, Any]]) -> HarnessResult:
    """The termination of one run, with a reason a person can act on."""
    ends = [e for e in events if e.get("type") in ("turn.completed", "turn.failed")]
    items = [e["item"] for e in events if e.get("type") == "item.completed" and isinstance(e.get("item"), dict)]
    details: dict[str, Any] = {
        "turns": len(ends),
        "commands": sum(1 for i in items if i.get("type") == "command_execution"),
        "tool_calls": tool_calls(items),
    }
    thread = next((e.get("thread_id") for e in events if e.get("type") == "thread.started"), None)
    if thread:
        details["thread_id"] = thread
    result = kit.outcome(execution, details)
    if (late := kit.timed_out("Codex", execution, result)) is not None:
        return late
    if ends and ends[-1]["type"] == "turn.completed" and execution.exit_code == 0:
        return result(Termination.COMPLETED, "Codex finished its turn")
    if ends and ends[-1]["type"] == "turn.failed":
        message = str((ends[-1].get("error") or {}).get("message", ""))[-TAIL:]
        return result(kit.api_failure(message), f"model API error: {message}")
    what = f"Codex exited with code {execution.exit_code} before its turn ended"
    return result(Termination.HARNESS_CRASH, kit.crash_reason(what, execution))


def tool_calls(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's commands and patches in order, as the behaviour analytics read them
    (``{"name", "arguments", "exit_code"}``; a command's exit status as Codex reported it)."""
    calls: list[dict[str, Any]] = []
    for item in items:
        if item.get("type") == "command_execution":
            code = item.get("exit_code")
            calls.append({"name": "exec_command", "arguments": {"cmd": str(item.get("command", ""))},
                          "exit_code": code if isinstance(code, int) else None})  # fmt: skip
        elif item.get("type") == "file_change":
            calls.append({"name": "file_change", "arguments": {"changes": item.get("changes", [])}})
    return calls


def render_transcript(events: list[dict[str, Any]]) -> str:
    """A readable transcript: messages, reasoning, commands with their output, failures."""
    blocks = []
    for event in events:
        item = event.get("item") if event.get("type") == "item.completed" else None
        if isinstance(item, dict):
            blocks.append(_item(item))
        elif event.get("type") == "turn.failed":
            blocks.append(f"[turn failed] {(event.get('error') or {}).get('message', '')}")
    return "\n\n".join(b for b in blocks if b)


def _item(item: dict[str, Any]) -> str:
    kind = item.get("type")
    if kind == "agent_message":
        return f"[assistant]\n{item.get('text', '')}"
    if kind == "reasoning":
        return f"[thinking]\n{item.get('text', '')}"
    if kind == "command_execution":
        output = str(item.get("aggregated_output") or "")[-TAIL:]
        return f"$ {item.get('command', '')}\n{output}".rstrip()
    if kind == "file_change":
        return f"[file change] {json.dumps(item.get('changes', []))}"
    if kind == "error":
        return f"[error] {item.get('message', '')}"
    return f"[{kind}]"
