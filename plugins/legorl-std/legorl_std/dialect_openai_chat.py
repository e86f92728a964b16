"""The OpenAI Chat Completions dialect ("openai-chat"): POST /v1/chat/completions.

Non-streaming only for now: ``stream: true`` is answered by the proxy with a 400. The
session's sampling is authoritative, so of the request's sampling fields only ``max_tokens``
(or ``max_completion_tokens``, which wins) and ``seed`` can take effect; ``stop`` strings and
``tool_choice`` are accepted and kept in ``ChatRequest.raw`` but not enforced.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import BaseModel, ConfigDict

from lego_rl import hookimpl
from lego_rl.data import Sampling
from lego_rl.kinds import ChatCompletion, ChatMessage, ChatRequest
from lego_rl.proxy.errors import BadRequest, openai_error
from lego_rl.registry import BuildContext

ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}
TOOL_CHOICES = {"auto", "none", "required"}


class OpenAIChatOptions(BaseModel):
    """The openai-chat dialect takes no options."""

    model_config = ConfigDict(extra="forbid")


def _require(condition: bool, message: str, param: str) -> None:
    if not condition:
        raise BadRequest(message, param=param)


def _text(content: Any, param: str) -> str:
    """Message content as text: a string, null, or a list of text parts."""
    if content is None or isinstance(content, str):
        return content or ""
    _require(
        isinstance(content, list), "content must be a string or a list of content parts", param
    )
    texts = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        _require(
            kind == "text" and isinstance(part.get("text"), str),
            f"only text content parts are supported (got type {kind!r})",
            f"{param}[{i}]",
        )
        texts.append(part["text"])
    return "\n".join(texts)


def _tool_call(call: Any, param: str) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    _require(
        isinstance(function, dict) and isinstance(function.get("name"), str),
        "each tool call needs a function with a name",
        param,
    )
    arguments = function.get("arguments", "{}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {
        "id": str(call.get("id", "")),
        "type": "function",
        "function": {"name": function["name"], "arguments": arguments},
    }


def _message(raw: Any, param: str) -> ChatMessage:
    _require(isinstance(raw, dict), "each message must be an object", param)
    role = ROLES.get(raw.get("role"))
    _require(
        role is not None,
        f"unsupported role {raw.get('role')!r} (use one of {', '.join(ROLES)})",
        f"{param}.role",
    )
    calls = raw.get("tool_calls") or []
    _require(isinstance(calls, list), "tool_calls must be a list", f"{param}.tool_calls")
    reasoning = raw.get("reasoning_content") or raw.get("reasoning") or ""
    return ChatMessage(
        role=role,
        content=_text(raw.get("content"), f"{param}.content"),
        reasoning=reasoning if isinstance(reasoning, str) else "",
        tool_calls=[_tool_call(c, f"{param}.tool_calls[{i}]") for i, c in enumerate(calls)],
        tool_call_id=str(raw.get("tool_call_id") or ""),
        name=str(raw.get("name") or ""),
    )


def _tools(raw: Any) -> list[dict[str, Any]]:
    _require(isinstance(raw, list), "tools must be a list", "tools")
    for i, tool in enumerate(raw):
        function = tool.get("function") if isinstance(tool, dict) else None
        _require(
            tool.get("type") == "function"
            and isinstance(function, dict)
            and isinstance(function.get("name"), str),
            'each tool must be {"type": "function", "function": {"name": ..., "parameters": ...}}',
            f"tools[{i}]",
        )
    return raw


def _sampling(body: dict[str, Any]) -> Sampling:
    """Only the fields the request sets, so the proxy can tell them from defaults."""
    fields: dict[str, Any] = {}
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            _require(isinstance(body[key], int | float), f"{key} must be a number", key)
            fields[key] = float(body[key])
    for key in ("max_tokens", "max_completion_tokens"):
        if body.get(key) is not None:
            _require(
                isinstance(body[key], int) and body[key] >= 1,
                f"{key} must be a positive integer",
                key,
            )
            fields["max_tokens"] = body[key]
    if body.get("seed") is not None:
        _require(isinstance(body["seed"], int), "seed must be an integer", "seed")
        fields["seed"] = body["seed"]
    return Sampling(**fields)


class OpenAIChatDialect:
    """OpenAI Chat Completions: request parsing, response and error shapes."""

    name = "openai-chat"
    routes = (("POST", "/v1/chat/completions"),)

    def parse(self, body: dict[str, Any]) -> ChatRequest:
        messages = body.get("messages")
        _require(
            isinstance(messages, list) and len(messages) > 0,
            "messages must be a non-empty list",
            "messages",
        )
        n = body.get("n")
        _require(n is None or n == 1, "only n=1 is supported", "n")
        choice = body.get("tool_choice")
        _require(
            choice is None or choice in TOOL_CHOICES or isinstance(choice, dict),
            f"tool_choice must be one of {sorted(TOOL_CHOICES)} or a function choice",
            "tool_choice",
        )
        model = body.get("model") or ""
        _require(isinstance(model, str), "model must be a string", "model")
        return ChatRequest(
            messages=[_message(m, f"messages[{i}]") for i, m in enumerate(messages)],
            tools=_tools(body["tools"]) if body.get("tools") is not None else [],
            sampling=_sampling(body),
            model=model,
            stream=bool(body.get("stream", False)),
            raw=body,
        )

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
            "usage": {
                "prompt_tokens": completion.prompt_tokens,
                "completion_tokens": completion.completion_tokens,
                "total_tokens": completion.prompt_tokens + completion.completion_tokens,
            },
        }

    def error(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return openai_error(status, message, kind)


def build(options: OpenAIChatOptions, ctx: BuildContext) -> OpenAIChatDialect:
    """OpenAI Chat Completions API (POST /v1/chat/completions)."""
    return OpenAIChatDialect()


@hookimpl
def legorl_register_dialect(register: Any) -> None:
    register("openai-chat", build, options=OpenAIChatOptions)
