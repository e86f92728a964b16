"""Split a completion's text into reasoning, content and tool calls, incrementally.

:class:`CompletionParser` takes the text as it is generated and yields events the moment they
are certain: reasoning and content deltas, and whole tool calls. Markup never leaks as text:
when the text ends with what may be the start of a marker (``<tool_call>``, ``</think>``), it
is held back until the next piece decides. The same parser serves non-streaming replies
(:func:`parse_completion`), so both paths agree by construction.

Reasoning is ``<think>...</think>`` at the start (or from the start when the prompt already
opened it). Each ``<tool_call>...</tool_call>`` body is read by the first tool-call format
that accepts it (:data:`TOOL_CALL_FORMATS`: Qwen3/Hermes JSON, qwen3_coder XML). A block no
format accepts stays in the content as text, exactly as the policy wrote it, and is counted
in ``malformed``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from lego_rl.proxy.jsonio import check_depth

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
TOOL_OPEN, TOOL_CLOSE = "<tool_call>", "</tool_call>"

ToolCallFormat = Callable[[str, dict[str, dict[str, Any]]], dict[str, Any] | None]
"""(block body, parameter schemas by tool name) -> {"name", "arguments": dict} or None."""


@dataclass(frozen=True)
class Delta:
    """A piece of reasoning or visible text."""

    kind: Literal["text", "reasoning"]
    text: str


@dataclass(frozen=True)
class ToolCall:
    """One complete tool call, OpenAI shape: {"id", "type", "function": {"name", "arguments"}}."""

    index: int
    call: dict[str, Any]


StreamEvent = Delta | ToolCall


@dataclass
class ParsedCompletion:
    content: str
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """OpenAI shape: {"id", "type": "function", "function": {"name", "arguments": str}}."""
    malformed: int = 0


_ids = random.Random()
"""Draws ids: its own generator, so that seeding the global one does not repeat them."""


def fresh_hex(bits: int) -> str:
    """``bits`` random bits in hex: ids that are unique, not secret (``uuid4`` reads the OS's
    randomness: ~20 us on a call that wakes an idle CPU here)."""
    return f"{_ids.getrandbits(bits):0{bits // 4}x}"


def new_tool_call_id() -> str:
    return f"call_{fresh_hex(96)}"


def hermes_call(block: str, schemas: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """``{"name": ..., "arguments": {...}}`` (Qwen3, Hermes); arguments may be a JSON string."""
    try:
        check_depth(block)  # deeper than a request may nest: kept as text, like any malformed call
        call = json.loads(block)
    except ValueError:
        return None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
        return None
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):
        try:
            check_depth(arguments)
            arguments = json.loads(arguments)
        except ValueError:
            return None
    return {"name": call["name"], "arguments": arguments} if isinstance(arguments, dict) else None


CODER_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)</function>", re.DOTALL)
CODER_PARAMETER = re.compile(r"<parameter=([^>\s]+)>\n?(.*?)\n?</parameter>", re.DOTALL)


def _coder_value(raw: str, schema: dict[str, Any] | None) -> Any:
    """A qwen3_coder parameter value: text for string parameters, JSON where it parses."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind == "string":
        return raw
    try:
        check_depth(raw)
        return json.loads(raw)
    except ValueError:
        return raw


def qwen3_coder_call(block: str, schemas: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """``<function=name>\\n<parameter=p>\\nvalue\\n</parameter>\\n</function>`` (Qwen3-Coder)."""
    match = CODER_FUNCTION.fullmatch(block)
    if match is None:
        return None
    name, body = match.group(1), match.group(2)
    params = schemas.get(name, {}).get("properties")
    params = params if isinstance(params, dict) else {}  # a request's schema, as it was sent
    arguments: dict[str, Any] = {}

    def take(m: re.Match[str]) -> str:
        arguments[m.group(1)] = _coder_value(m.group(2), params.get(m.group(1)))
        return ""

    rest = CODER_PARAMETER.sub(take, body)
    return {"name": name, "arguments": arguments} if not rest.strip() else None


TOOL_CALL_FORMATS: dict[str, ToolCallFormat] = {
    "hermes": hermes_call,
    "qwen3_coder": qwen3_coder_call,
}
"""Tool-call body formats by name; a parser tries the ones it is given, in order."""


Schemas = dict[str, dict[str, Any]]
_recent_schemas: tuple[tuple[object, Schemas], ...] = ()
"""The last few tool lists' schemas, by the lists' identity: the proxy hands every request that
repeats a tool list the same shared (never mutated) list."""


def tool_schemas(tools: Iterable[dict[str, Any]]) -> Schemas:
    """Parameter schemas by tool name, from OpenAI-shaped function tools (not to be mutated)."""
    global _recent_schemas
    recent = _recent_schemas
    for known, schemas in recent:
        if known is tools:
            return schemas
    out: Schemas = {}
    for tool in tools:
        function = tool.get("function") or {}
        if isinstance(function.get("name"), str):
            out[function["name"]] = function.get("parameters") or {}
    if out:
        _recent_schemas = ((tools, out), *recent[:7])
    return out


def held_tail(text: str, marker: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``marker``."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


class CompletionParser:
    """Feed decoded text with :meth:`feed`; call :meth:`finish` once generation ends."""

    def __init__(
        self,
        *,
        in_reasoning: bool = False,
        tools: Sequence[dict[str, Any]] = (),
        formats: Sequence[str] = ("hermes", "qwen3_coder"),
    ):
        self.mode = "reasoning" if in_reasoning else "start"
        self.pending = ""
        self.at_block_start = True
        """Whitespace at the start of reasoning/content is dropped."""
        self.formats = [TOOL_CALL_FORMATS[f] for f in formats]
        self.schemas = tool_schemas(tools)
        self.gap = ""
        """Whitespace between the text before a ``<tool_call>`` and the tag."""
        self.calls = 0
        self.malformed = 0

    def feed(self, text: str) -> list[StreamEvent]:
        self.pending += text
        events: list[StreamEvent] = []
        while self._step(events, final=False):
            pass
        return events

    def finish(self) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        while self._step(events, final=True):
            pass
        if self.mode == "tool":  # an unterminated tool call is text
            self.malformed += 1
            gap = "" if self.at_block_start else self.gap
            self._emit(events, "text", gap + TOOL_OPEN + self.pending, final=True)
        elif self.pending:
            self._emit(
                events,
                "reasoning" if self.mode == "reasoning" else "text",
                self.pending,
                True,
            )
        self.pending = ""
        return events

    def _step(self, events: list[StreamEvent], final: bool) -> bool:
        """Consume what can be decided now; True when the mode changed (step again)."""
        if self.mode == "start":
            head = self.pending.lstrip()
            if head.startswith(THINK_OPEN):
                self.mode, self.pending = "reasoning", head[len(THINK_OPEN) :]
                return True
            if not final and (not head or THINK_OPEN.startswith(head)):
                return False
            self.mode = "content"
            return True
        if self.mode == "tool":
            end = self.pending.find(TOOL_CLOSE)
            if end < 0:
                return False
            block, self.pending = (
                self.pending[:end],
                self.pending[end + len(TOOL_CLOSE) :],
            )
            self.mode = "content"
            self._tool_call(events, block)
            return True
        marker = THINK_CLOSE if self.mode == "reasoning" else TOOL_OPEN
        kind: Literal["text", "reasoning"] = "reasoning" if self.mode == "reasoning" else "text"
        at = self.pending.find(marker)
        if at >= 0:
            head = self.pending[:at]
            self._emit(events, kind, head, final=True)
            self.pending = self.pending[at + len(marker) :]
            if self.mode == "reasoning":
                self.mode, self.at_block_start = "content", True
            else:
                self.mode, self.gap = "tool", head[len(head.rstrip()) :]
            return True
        if not final:
            keep = held_tail(self.pending, marker)
            ready = self.pending[: len(self.pending) - keep]
            stripped = ready.rstrip()
            self._emit(events, kind, stripped, final=False)
            self.pending = ready[len(stripped) :] + self.pending[len(ready) :]
        return False

    def _emit(
        self,
        events: list[StreamEvent],
        kind: Literal["text", "reasoning"],
        text: str,
        final: bool,
    ) -> None:
        """Emit text, dropping leading whitespace of a block and (when final) trailing."""
        if self.at_block_start:
            text = text.lstrip()
        if final:
            text = text.rstrip()
        if text:
            self.at_block_start = False
            events.append(Delta(kind, text))

    def _tool_call(self, events: list[StreamEvent], block: str) -> None:
        body = block.strip()
        for parse in self.formats:
            call = parse(body, self.schemas)
            if call is not None:
                events.append(
                    ToolCall(
                        self.calls,
                        {
                            "id": new_tool_call_id(),
                            "type": "function",
                            "function": {
                                "name": call["name"],
                                "arguments": json.dumps(call["arguments"], ensure_ascii=False),
                            },
                        },
                    )
                )
                self.calls += 1
                return
        self.malformed += 1
        gap = "" if self.at_block_start else self.gap
        self.at_block_start = False
        events.append(Delta("text", gap + TOOL_OPEN + block + TOOL_CLOSE))


def collect(events: Iterable[StreamEvent], parsed: ParsedCompletion) -> None:
    """Accumulate events into ``parsed`` (content, reasoning, tool calls)."""
    for event in events:
        if isinstance(event, ToolCall):
            parsed.tool_calls.append(event.call)
        elif event.kind == "reasoning":
            parsed.reasoning += event.text
        else:
            parsed.content += event.text


def parse_completion(
    text: str, *, in_reasoning: bool = False, tools: Sequence[dict[str, Any]] = ()
) -> ParsedCompletion:
    """Reasoning, content and well-formed tool calls of one completion's decoded text."""
    parser = CompletionParser(in_reasoning=in_reasoning, tools=tools)
    parsed = ParsedCompletion(content="")
    collect(parser.feed(text), parsed)
    collect(parser.finish(), parsed)
    parsed.malformed = parser.malformed
    return parsed
