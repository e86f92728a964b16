"""Split a completion's text into reasoning, content and tool calls (Qwen3 / Hermes format).

Reasoning is ``<think>...</think>`` at the start (the opening tag may sit in the prompt);
each tool call is ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``. A block
whose JSON does not parse into a name and arguments stays in the content as text, so the
harness sees exactly what the policy wrote.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


@dataclass
class ParsedCompletion:
    content: str
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """OpenAI shape: {"id", "type": "function", "function": {"name", "arguments": str}}."""


def new_tool_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def split_reasoning(text: str) -> tuple[str, str]:
    """(reasoning, rest). An unterminated ``<think>`` makes the whole text reasoning."""
    if THINK_CLOSE in text:
        reasoning, rest = text.split(THINK_CLOSE, 1)
        return reasoning.split(THINK_OPEN, 1)[-1].strip(), rest
    stripped = text.lstrip()
    if stripped.startswith(THINK_OPEN):
        return stripped[len(THINK_OPEN) :].strip(), ""
    return "", text


def parse_tool_call(block: str) -> dict[str, Any] | None:
    """One ``<tool_call>`` body -> an OpenAI tool call, or None when it is not valid."""
    try:
        call = json.loads(block)
    except json.JSONDecodeError:
        return None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
        return None
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    return {
        "id": new_tool_call_id(),
        "type": "function",
        "function": {"name": call["name"], "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def parse_completion(text: str) -> ParsedCompletion:
    """Reasoning, content and well-formed tool calls of one completion's decoded text."""
    reasoning, rest = split_reasoning(text)
    calls: list[dict[str, Any]] = []

    def take(match: re.Match[str]) -> str:
        call = parse_tool_call(match.group(1).strip())
        if call is None:
            return match.group(0)
        calls.append(call)
        return ""

    content = TOOL_CALL.sub(take, rest)
    return ParsedCompletion(content=content.strip(), reasoning=reasoning, tool_calls=calls)
