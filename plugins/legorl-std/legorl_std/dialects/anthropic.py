"""The Anthropic Messages dialect ("anthropic-messages"): POST /v1/messages (+ count_tokens).

What Claude Code sends is understood: ``system`` as a string or text blocks, ``role:
"system"`` messages inside ``messages``, text / thinking / tool_use / tool_result blocks,
custom tools (``input_schema``), ``tool_choice``, ``stop_sequences``; fields the proxy has no
use for (``metadata``, ``context_management``, ``output_config``, ``cache_control``, the
``thinking`` config...) are accepted and ignored, as are ``anthropic-beta`` headers and the
``?beta=true`` query. Streaming sends Anthropic's event sequence (message_start, ping,
content_block_start/delta/stop for thinking, text and tool_use, message_delta, message_stop).
As everywhere on the proxy, the session's sampling is authoritative; a request may only lower
``max_tokens`` and add ``stop_sequences`` (the reply ends before the first one met:
``stop_reason: "stop_sequence"`` and the string in ``stop_sequence``). Server tools (a ``type``
other than ``custom``: web search, code execution, the computer, bash and text-editor tools)
are refused or dropped as the option ``hosted_tools`` says (:mod:`lego_rl.proxy.hosted`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict

from lego_rl.dialect_kit import (
    Delta,
    FieldTexts,
    HostedTools,
    MessageMemo,
    Settings,
    StreamEvent,
    TextMemo,
    chat_request,
    checked,
    field_texts,
    fragments,
    hosted,
    hosted_tools_field,
    model_name,
    object_field,
    read_fields,
    request_sampling,
    require,
    shown,
    sse,
    stream_flag,
    string_field,
    text_of,
)
from lego_rl.kinds import ChatCompletion, ChatMessage, ChatRequest
from lego_rl.registry import BuildContext

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def stop_fields(completion: ChatCompletion) -> dict[str, Any]:
    """``stop_reason`` and ``stop_sequence`` of a finished reply."""
    if completion.stop_sequence is not None and not completion.tool_calls:
        return {"stop_reason": "stop_sequence", "stop_sequence": completion.stop_sequence}
    return {"stop_reason": STOP_REASONS[completion.finish_reason], "stop_sequence": None}


class AnthropicOptions(BaseModel):
    """Options of the anthropic-messages dialect."""

    model_config = ConfigDict(extra="forbid")

    hosted_tools: HostedTools = hosted_tools_field()


def anthropic_error(status: int, message: str, kind: str) -> dict[str, Any]:
    kind_type = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind_type, "message": message}}


def _blocks(raw: Any, param: str) -> list[dict[str, Any]]:
    if isinstance(raw, str):
        return [{"type": "text", "text": raw}]
    require(isinstance(raw, list), "content must be a string or a list of blocks", param)
    for i, block in enumerate(raw):
        require(
            isinstance(block, dict),
            "each content block must be an object",
            f"{param}[{i}]",
        )
    return raw


def _assistant(blocks: list[dict[str, Any]], param: str) -> ChatMessage:
    message = ChatMessage(role="assistant")
    texts = []
    for i, block in enumerate(blocks):
        kind = block.get("type")
        where = f"{param}[{i}]"
        if kind == "text":
            texts.append(string_field(block, "text", where))
        elif kind == "thinking":
            message.reasoning += string_field(block, "thinking", where)
        elif kind == "tool_use":
            require(
                isinstance(block.get("name"), str),
                "tool_use needs a name",
                f"{param}[{i}]",
            )
            message.tool_calls.append(
                {
                    "id": string_field(block, "id", where),
                    "type": "function",
                    "function": {
                        "name": block["name"],
                        "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False),
                    },
                }
            )
        elif kind != "redacted_thinking":
            require(
                False,
                f"unsupported assistant block type {shown(kind)}",
                f"{param}[{i}].type",
            )
    message.content = "\n".join(texts)
    return message


def _user(blocks: list[dict[str, Any]], role: str, param: str) -> list[ChatMessage]:
    """Tool results become tool messages (in order); the text after them one user message."""
    out: list[ChatMessage] = []
    texts: list[str] = []
    for i, block in enumerate(blocks):
        kind = block.get("type")
        where = f"{param}[{i}]"
        if kind == "tool_result" and role == "user":
            out.append(
                ChatMessage(
                    role="tool",
                    content=text_of(block.get("content"), f"{where}.content"),
                    tool_call_id=string_field(block, "tool_use_id", where),
                )
            )
        elif kind == "text":
            texts.append(string_field(block, "text", where))
        else:
            require(
                False,
                f"unsupported {role} content block type {shown(kind)} (the proxy serves text, "
                "tool_result, and in assistant turns thinking and tool_use)",
                f"{param}[{i}].type",
            )
    if texts or not out:
        out.append(
            ChatMessage(role="system" if role == "system" else "user", content="\n".join(texts))
        )
    return out


def _tools(raw: Any, policy: HostedTools = "refuse") -> tuple[list[dict[str, Any]], list[str]]:
    """Custom tools in OpenAI's function shape, and the labels of the server tools dropped."""
    require(isinstance(raw, list), "tools must be a list", "tools")
    tools, dropped = [], []
    for i, tool in enumerate(raw):
        param = f"tools[{i}]"
        require(isinstance(tool, dict), "each tool must be an object", param)
        kind = tool.get("type") or "custom"
        require(isinstance(kind, str), "a tool's type must be a string", f"{param}.type")
        if kind != "custom":
            dropped.append(hosted(tool, kind, i, policy))
            continue
        require(
            isinstance(tool.get("name"), str),
            'a custom tool needs a name ({"name", "description", "input_schema"})',
            param,
        )
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": tool["name"],
                    "description": string_field(tool, "description", param),
                    "parameters": object_field(tool, "input_schema", param) or {"type": "object"},
                },
            }
        )
    return tools, dropped


def _system(raw: Any) -> str:
    """``system`` (a string or text blocks) as text; "" when absent or empty."""
    return text_of(raw, "system") if raw else ""


def _system_head(raw: Any) -> list[ChatMessage]:
    """The system message a request's ``system`` field makes (none when empty)."""
    system = _system(raw)
    return [ChatMessage(role="system", content=system)] if system else []


def tool_use_id(call_id: str) -> str:
    return "toolu_" + call_id.removeprefix("call_")


def signature(thinking: str) -> str:
    """A stand-in signature for thinking blocks (clients echo it back; the proxy ignores it)."""
    return hashlib.sha256(thinking.encode()).hexdigest()


def parse_message(raw: Any, index: int) -> list[ChatMessage]:
    """One raw message of ``messages`` (at ``index``) as neutral messages."""
    param = f"messages[{index}]"
    require(isinstance(raw, dict), "each message must be an object", param)
    role = raw.get("role")
    require(
        role in ("user", "assistant", "system"),
        f"unsupported role {role!r} (use user, assistant or system)",
        f"{param}.role",
    )
    blocks = _blocks(raw.get("content"), f"{param}.content")
    if role == "assistant":
        return [_assistant(blocks, f"{param}.content")]
    return _user(blocks, role, f"{param}.content")


def _settings(body: dict[str, Any]) -> Settings:
    """The settings of a body's top-level fields (a BadRequest naming a wrong one)."""
    choice = body.get("tool_choice")
    require(
        choice is None or (isinstance(choice, dict) and "type" in choice),
        'tool_choice must be an object such as {"type": "auto"}',
        "tool_choice",
    )
    return (
        request_sampling(body, ("max_tokens",), "stop_sequences"),
        model_name(body),
        stream_flag(body),
    )


class AnthropicDialect:
    """Anthropic Messages: request parsing, response, stream and error shapes.

    A conversation's earlier messages are parsed once: later calls reuse them through a
    :class:`MessageMemo`, and the system prompt and tool list through :class:`TextMemo`s (exact;
    what they keep is shared, never to be mutated). :meth:`parse_body` reads a body as texts
    (:mod:`lego_rl.proxy.fast.body_texts`), so what a call re-sends is recognised, not parsed."""

    name = "anthropic-messages"
    routes: Sequence[tuple[str, str]] = (("POST", "/v1/messages"),)
    count_tokens_route = ("POST", "/v1/messages/count_tokens")

    def __init__(self, options: AnthropicOptions | None = None) -> None:
        self.options = options or AnthropicOptions()
        self.memo = MessageMemo(parse_message, f"{self.name}.messages")
        self.systems: TextMemo[bytes, list[ChatMessage]] = TextMemo(
            _system_head, f"{self.name}.system"
        )
        self.tools: TextMemo[bytes, tuple[list[dict[str, Any]], list[str]]] = TextMemo(
            partial(_tools, policy=self.options.hosted_tools), f"{self.name}.tools"
        )
        self.fields: TextMemo[FieldTexts, tuple[dict[str, Any], Settings | None]] = TextMemo(
            partial(checked, _settings), f"{self.name}.fields", read=read_fields
        )

    def parse(self, body: dict[str, Any]) -> ChatRequest:
        raw_messages = body.get("messages")
        require(
            isinstance(raw_messages, list) and len(raw_messages) > 0,
            "messages must be a non-empty list",
            "messages",
        )
        assert isinstance(raw_messages, list)  # require() raised otherwise
        tools = body.get("tools")
        head = _system_head(body.get("system"))
        messages = self.memo.parse(raw_messages)
        tool_list, dropped = (
            _tools(tools, self.options.hosted_tools) if tools is not None else ([], [])
        )
        return chat_request(body, [*head, *messages], tool_list, _settings(body), dropped)

    def parse_body(self, body: bytes, scope: str = "") -> ChatRequest | None:
        """:meth:`parse` of a request body's bytes, reading only what earlier requests did not
        have; None when the body is not what the memos can take (not a JSON object, messages
        not a non-empty array, a text that is not JSON): :meth:`parse` of the body then says
        what is wrong. ``scope`` (the session) names whose earlier messages arrays to look for
        at the start of this one. ``raw`` of the request holds the top-level fields but these
        three."""
        fields = field_texts(body)
        if fields is None or "messages" not in fields:
            return None
        array = fields.pop("messages")
        system, tools = fields.pop("system", b"null"), fields.pop("tools", b"null")
        try:
            rest, settings = self.fields.get(tuple(fields.items()))
            messages = self.memo.parse_array(array, scope)
            if messages is None:
                return None
            head = self.systems.get(system)
            tool_list, dropped = self.tools.get(tools) if tools != b"null" else ([], [])
        except ValueError:
            return None
        settings = settings or _settings(rest)
        return chat_request(rest, [*head, *messages], tool_list, settings, dropped)

    def content(self, completion: ChatCompletion) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if completion.reasoning:
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": completion.reasoning,
                    "signature": signature(completion.reasoning),
                }
            )
        if completion.content:
            blocks.append({"type": "text", "text": completion.content})
        for call in completion.tool_calls:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": tool_use_id(call["id"]),
                    "name": call["function"]["name"],
                    "input": json.loads(call["function"]["arguments"]),
                }
            )
        return blocks

    def format(
        self, request: ChatRequest, completion: ChatCompletion, call_id: str
    ) -> dict[str, Any]:
        return {
            "id": f"msg_{call_id}",
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": self.content(completion),
            **stop_fields(completion),
            "usage": usage(completion.prompt_tokens, completion.completion_tokens),
        }

    def error(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return anthropic_error(status, message, kind)

    def stream(self, request: ChatRequest, call_id: str) -> AnthropicStream:
        return AnthropicStream(request, call_id)


def usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


class AnthropicStream:
    """One reply as Anthropic's server-sent events; blocks open and close as the kind changes."""

    def __init__(self, request: ChatRequest, call_id: str):
        self.request, self.id = request, f"msg_{call_id}"
        self.index = -1
        self.open: str = ""
        self.thinking = ""

    def _send(self, kind: str, **data: Any) -> str:
        return sse({"type": kind, **data}, event=kind)

    def _close(self) -> str:
        if not self.open:
            return ""
        out = ""
        if self.open == "thinking":
            delta = {"type": "signature_delta", "signature": signature(self.thinking)}
            out += self._send("content_block_delta", index=self.index, delta=delta)
        self.open = ""
        return out + self._send("content_block_stop", index=self.index)

    def _begin(self, kind: str, block: dict[str, Any]) -> str:
        out = self._close()
        self.index += 1
        self.open = kind
        return out + self._send("content_block_start", index=self.index, content_block=block)

    def start(self, prompt_tokens: int) -> str:
        message: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.request.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage(prompt_tokens, 1),
        }
        return self._send("message_start", message=message) + self._send("ping")

    def event(self, event: StreamEvent) -> str:
        if isinstance(event, Delta):
            out = ""
            if event.kind == "reasoning":
                if self.open != "thinking":
                    out = self._begin("thinking", {"type": "thinking", "thinking": ""})
                self.thinking += event.text
                delta = {"type": "thinking_delta", "thinking": event.text}
            else:
                if self.open != "text":
                    out = self._begin("text", {"type": "text", "text": ""})
                delta = {"type": "text_delta", "text": event.text}
            return out + self._send("content_block_delta", index=self.index, delta=delta)
        function = event.call["function"]
        block = {
            "type": "tool_use",
            "id": tool_use_id(event.call["id"]),
            "name": function["name"],
            "input": {},
        }
        out = self._begin("tool_use", block)
        for piece in fragments(function["arguments"]):
            delta = {"type": "input_json_delta", "partial_json": piece}
            out += self._send("content_block_delta", index=self.index, delta=delta)
        return out + self._close()

    def finish(self, completion: ChatCompletion) -> str:
        delta = stop_fields(completion)
        return (
            self._close()
            + self._send(
                "message_delta",
                delta=delta,
                usage={"output_tokens": completion.completion_tokens},
            )
            + self._send("message_stop")
        )

    def fail(self, status: int, message: str, kind: str) -> str:
        return sse(anthropic_error(status, message, kind), event="error")


def build(options: AnthropicOptions, ctx: BuildContext) -> AnthropicDialect:
    """Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens)."""
    return AnthropicDialect(options)


def register(register: Any) -> None:
    register("anthropic-messages", build, options=AnthropicOptions)
