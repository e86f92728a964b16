"""The OpenAI Chat Completions dialect ("openai-chat"): POST /v1/chat/completions.

Streams with ``stream: true`` (chat.completion.chunk events: the role, content and
reasoning_content deltas, tool-call deltas with index/id/name then argument fragments, the
finish reason, usage when ``stream_options.include_usage``, then ``[DONE]``). The
session's sampling is authoritative, so of the request's sampling fields only ``max_tokens``
(or ``max_completion_tokens``, which wins) and ``seed`` can take effect, and ``stop`` strings
(up to 4) end the reply before the first one met; ``tool_choice`` is accepted and kept in
``ChatRequest.raw`` but not enforced. ``stream`` is a boolean (absent or null: false). Tools
of a type other than ``function`` are refused or dropped as the option ``hosted_tools`` says
(:mod:`lego_rl.proxy.hosted`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict

from lego_rl.dialect_kit import (
    Delta,
    FieldTexts,
    HostedTools,
    MessageMemo,
    Role,
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
    openai_error,
    read_fields,
    request_sampling,
    require,
    role_of,
    shown,
    sse,
    stream_flag,
    string_field,
    text_of,
)
from lego_rl.kinds import ChatCompletion, ChatMessage, ChatRequest
from lego_rl.registry import BuildContext

ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}
TOOL_CHOICES = {"auto", "none", "required"}


class OpenAIChatOptions(BaseModel):
    """Options of the openai-chat dialect."""

    model_config = ConfigDict(extra="forbid")

    hosted_tools: HostedTools = hosted_tools_field()


def _tool_call(call: Any, param: str) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    require(
        isinstance(function, dict) and isinstance(function.get("name"), str),
        "each tool call needs a function with a name",
        param,
    )
    assert isinstance(function, dict)  # require() raised otherwise
    arguments = function.get("arguments", "{}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {
        "id": string_field(call, "id", param),
        "type": "function",
        "function": {"name": function["name"], "arguments": arguments},
    }


def _message(raw: Any, param: str) -> ChatMessage:
    require(isinstance(raw, dict), "each message must be an object", param)
    role = role_of(raw, ROLES, param)
    calls = raw.get("tool_calls") or []
    require(isinstance(calls, list), "tool_calls must be a list", f"{param}.tool_calls")
    reasoning = raw.get("reasoning_content") or raw.get("reasoning") or ""
    return ChatMessage(
        role=role,
        content=text_of(raw.get("content"), f"{param}.content"),
        reasoning=reasoning if isinstance(reasoning, str) else "",
        tool_calls=[_tool_call(c, f"{param}.tool_calls[{i}]") for i, c in enumerate(calls)],
        tool_call_id=string_field(raw, "tool_call_id", param),
        name=string_field(raw, "name", param),
    )


FUNCTION_TOOL = '{"type": "function", "function": {"name": ..., "parameters": ...}}'


def _tools(raw: Any, policy: HostedTools = "refuse") -> tuple[list[dict[str, Any]], list[str]]:
    """The function tools (as sent) and the labels of the hosted ones dropped."""
    require(isinstance(raw, list), "tools must be a list", "tools")
    served, dropped = [], []
    for i, tool in enumerate(raw):
        param = f"tools[{i}]"
        require(isinstance(tool, dict), f"each tool must be {FUNCTION_TOOL}", param)
        kind = tool.get("type")
        require(isinstance(kind, str), f"each tool must be {FUNCTION_TOOL}", f"{param}.type")
        if kind != "function":
            dropped.append(hosted(tool, kind, i, policy))
            continue
        function = tool.get("function")
        require(
            isinstance(function, dict) and isinstance(function.get("name"), str),
            f"each tool must be {FUNCTION_TOOL}",
            param,
        )
        string_field(function, "description", f"{param}.function")
        object_field(function, "parameters", f"{param}.function")
        served.append(tool)
    return (raw if not dropped else served), dropped


def _parse_one(raw: Any, index: int) -> list[ChatMessage]:
    return [_message(raw, f"messages[{index}]")]


def _choices(body: dict[str, Any]) -> None:
    """The checks made before the messages are read: ``n`` and ``tool_choice``."""
    n = body.get("n")
    require(n is None or n == 1, f"only n=1 is supported (got {shown(n)})", "n")
    choice = body.get("tool_choice")
    require(
        choice is None
        or (isinstance(choice, str) and choice in TOOL_CHOICES)
        or isinstance(choice, dict),
        f"tool_choice must be one of {sorted(TOOL_CHOICES)} or a function choice",
        "tool_choice",
    )
    object_field(body, "stream_options", "body")


def _settings(body: dict[str, Any]) -> Settings:
    sampling = request_sampling(body, ("max_tokens", "max_completion_tokens"), "stop", 4)
    return sampling, model_name(body), stream_flag(body)


def _checked_settings(body: dict[str, Any]) -> Settings:
    _choices(body)
    return _settings(body)


class OpenAIChatDialect:
    """OpenAI Chat Completions: request parsing, response and error shapes. A body is read as
    texts (:meth:`parse_body`): the session's earlier messages and the tool list are recognised
    by their bytes, not parsed again."""

    name = "openai-chat"
    routes: Sequence[tuple[str, str]] = (("POST", "/v1/chat/completions"),)

    def __init__(self, options: OpenAIChatOptions | None = None) -> None:
        self.options = options or OpenAIChatOptions()
        self.memo = MessageMemo(_parse_one, f"{self.name}.messages")
        self.tools: TextMemo[bytes, tuple[list[dict[str, Any]], list[str]]] = TextMemo(
            partial(_tools, policy=self.options.hosted_tools), f"{self.name}.tools"
        )
        self.fields: TextMemo[FieldTexts, tuple[dict[str, Any], Settings | None]] = TextMemo(
            partial(checked, _checked_settings), f"{self.name}.fields", read=read_fields
        )

    def parse(self, body: dict[str, Any]) -> ChatRequest:
        messages = body.get("messages")
        require(
            isinstance(messages, list) and len(messages) > 0,
            "messages must be a non-empty list",
            "messages",
        )
        assert isinstance(messages, list)  # require() raised otherwise
        _choices(body)
        parsed = [_message(m, f"messages[{i}]") for i, m in enumerate(messages)]
        tools, dropped = (
            _tools(body["tools"], self.options.hosted_tools)
            if body.get("tools") is not None
            else ([], [])
        )
        return chat_request(body, parsed, tools, _settings(body), dropped)

    def parse_body(self, body: bytes, scope: str = "") -> ChatRequest | None:
        """:meth:`parse` of a request body's bytes, reading only what earlier requests of
        ``scope`` (the session) did not have (as the Anthropic dialect does); None when the
        body is not what the memos can take, or a top-level field is wrong: :meth:`parse` of
        the body then says what is wrong, in its order. ``raw`` holds the top-level fields but
        messages and tools."""
        fields = field_texts(body)
        if fields is None or "messages" not in fields:
            return None
        array, tools = fields.pop("messages"), fields.pop("tools", b"null")
        try:
            rest, settings = self.fields.get(tuple(fields.items()))
            if settings is None:
                return None
            messages = self.memo.parse_array(array, scope)
            if messages is None:
                return None
            tool_list, dropped = self.tools.get(tools) if tools != b"null" else ([], [])
        except ValueError:
            return None
        return chat_request(rest, messages, tool_list, settings, dropped)

    def format(
        self, request: ChatRequest, completion: ChatCompletion, call_id: str
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": completion.content or (None if completion.tool_calls else ""),
        }
        if completion.tool_calls:
            message["tool_calls"] = completion.tool_calls
        if completion.reasoning:
            message["reasoning_content"] = completion.reasoning
        return {
            "id": f"chatcmpl-{call_id}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": completion.finish_reason,
                }
            ],
            "usage": usage(completion),
        }

    def error(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return openai_error(status, message, kind)

    def stream(self, request: ChatRequest, call_id: str) -> OpenAIChatStream:
        return OpenAIChatStream(request, call_id)


def usage(completion: ChatCompletion) -> dict[str, int]:
    return {
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "total_tokens": completion.prompt_tokens + completion.completion_tokens,
    }


class OpenAIChatStream:
    """One reply as chat.completion.chunk server-sent events."""

    def __init__(self, request: ChatRequest, call_id: str):
        self.request = request
        self.id = f"chatcmpl-{call_id}"
        self.created = int(time.time())
        options = request.raw.get("stream_options")
        self.include_usage = isinstance(options, dict) and bool(options.get("include_usage"))

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse(
            {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.request.model,
                "choices": [choice],
            }
        )

    def start(self, prompt_tokens: int) -> str:
        return self._chunk({"role": "assistant", "content": ""})

    def event(self, event: StreamEvent) -> str:
        if isinstance(event, Delta):
            key = "content" if event.kind == "text" else "reasoning_content"
            return self._chunk({key: event.text})
        function = event.call["function"]
        head = {
            "index": event.index,
            "id": event.call["id"],
            "type": "function",
            "function": {"name": function["name"], "arguments": ""},
        }
        parts = [self._chunk({"tool_calls": [head]})]
        parts += [
            self._chunk({"tool_calls": [{"index": event.index, "function": {"arguments": f}}]})
            for f in fragments(function["arguments"])
        ]
        return "".join(parts)

    def finish(self, completion: ChatCompletion) -> str:
        out = self._chunk({}, completion.finish_reason)
        if self.include_usage:
            out += sse(
                {
                    "id": self.id,
                    "object": "chat.completion.chunk",
                    "created": self.created,
                    "model": self.request.model,
                    "choices": [],
                    "usage": usage(completion),
                }
            )
        return out + sse("[DONE]")

    def fail(self, status: int, message: str, kind: str) -> str:
        return sse(openai_error(status, message, kind)) + sse("[DONE]")


def build(options: OpenAIChatOptions, ctx: BuildContext) -> OpenAIChatDialect:
    """OpenAI Chat Completions API (POST /v1/chat/completions)."""
    return OpenAIChatDialect(options)


def register(register: Any) -> None:
    register("openai-chat", build, options=OpenAIChatOptions)
