"""The official SDK clients of the first-party dialects, pointed at a proxy session, and the
scripted proxy the dialect contracts drive them through.

Each driver makes a plain completion, a tool call round trip (the call, then its result sent
back) and a streamed completion with the ``openai`` or ``anthropic`` package, imported on
first use. Tests can build clients of a session with :func:`openai_client` and
:func:`anthropic_client`.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from lego_rl.data import CallRecord
from lego_rl.testing.contracts.base import ContractError

MODEL = "legorl-conformance"
MAX_TOKENS = 256
SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
DESCRIPTION = "Run a shell command"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


def need(package: str, purpose: str) -> Any:
    """Import ``package``, or raise a ContractError saying what needs it and how to install it."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise ContractError(
            f"{purpose} needs the `{package}` package, which cannot be imported ({exc}): "
            f"pip install {package} (part of lego-rl's test extra: pip install 'lego-rl[test]')"
        ) from None


def sdk(package: str) -> Any:
    """The official client package ``openai`` or ``anthropic``."""
    return need(package, "this contract drives the dialect with its official client and")


def openai_client(session_url: str, api_key: str, **options: Any) -> Any:
    """An ``openai.OpenAI`` client of the proxy session at ``session_url``, no retries."""
    return sdk("openai").OpenAI(base_url=session_url + "/v1", api_key=api_key, max_retries=0, **options)


def anthropic_client(session_url: str, api_key: str, **options: Any) -> Any:
    """An ``anthropic.Anthropic`` client of the proxy session at ``session_url``, no retries."""
    return sdk("anthropic").Anthropic(base_url=session_url, api_key=api_key, max_retries=0, **options)


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


class OpenAIChatDriver:
    """Chat Completions (``client.chat.completions``)."""

    def __init__(self, session_url: str, api_key: str):
        self.client = openai_client(session_url, api_key)

    def complete(self, prompt: str) -> str:
        reply = self.client.chat.completions.create(model=MODEL, messages=[_user(prompt)])
        return str(reply.choices[0].message.content or "")

    def tool_round_trip(self, prompt: str, tool: str, output: str) -> tuple[list[ToolCall], str]:
        tools = [
            {"type": "function", "function": {"name": tool, "description": DESCRIPTION, "parameters": SCHEMA}}
        ]
        messages: list[dict[str, Any]] = [_user(prompt)]
        message = (
            self.client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
            .choices[0]
            .message
        )
        calls = list(message.tool_calls or [])
        if not calls:
            return [], ""
        messages.append(message.model_dump(exclude_none=True))
        messages += [{"role": "tool", "tool_call_id": c.id, "content": output} for c in calls]
        second = self.client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        found = [ToolCall(c.function.name, json.loads(c.function.arguments)) for c in calls]
        return found, str(second.choices[0].message.content or "")

    def stream(self, prompt: str) -> str:
        chunks = self.client.chat.completions.create(model=MODEL, messages=[_user(prompt)], stream=True)
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


class AnthropicDriver:
    """Messages (``client.messages``)."""

    def __init__(self, session_url: str, api_key: str):
        self.client = anthropic_client(session_url, api_key)

    def complete(self, prompt: str) -> str:
        reply = self.client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, messages=[_user(prompt)])
        return _text(reply.content)

    def tool_round_trip(self, prompt: str, tool: str, output: str) -> tuple[list[ToolCall], str]:
        tools = [{"name": tool, "description": DESCRIPTION, "input_schema": SCHEMA}]
        messages: list[dict[str, Any]] = [_user(prompt)]
        first = self.client.messages.create(
            model=MODEL, max_tokens=MAX_TOKENS, messages=messages, tools=tools
        )
        uses = [b for b in first.content if b.type == "tool_use"]
        if not uses:
            return [], ""
        messages.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]}
        )
        results = [{"type": "tool_result", "tool_use_id": b.id, "content": output} for b in uses]
        messages.append({"role": "user", "content": results})
        second = self.client.messages.create(
            model=MODEL, max_tokens=MAX_TOKENS, messages=messages, tools=tools
        )
        return [ToolCall(b.name, dict(b.input)) for b in uses], _text(second.content)

    def stream(self, prompt: str) -> str:
        with self.client.messages.stream(
            model=MODEL, max_tokens=MAX_TOKENS, messages=[_user(prompt)]
        ) as events:
            return "".join(events.text_stream)


class OpenAIResponsesDriver:
    """Responses (``client.responses``), stateless: the whole input every time."""

    def __init__(self, session_url: str, api_key: str):
        self.client = openai_client(session_url, api_key)

    def complete(self, prompt: str) -> str:
        return str(self.client.responses.create(model=MODEL, input=prompt).output_text)

    def tool_round_trip(self, prompt: str, tool: str, output: str) -> tuple[list[ToolCall], str]:
        tools = [
            {
                "type": "function",
                "name": tool,
                "description": DESCRIPTION,
                "parameters": SCHEMA,
                "strict": False,
            }
        ]
        items: list[dict[str, Any]] = [_user(prompt)]
        first = self.client.responses.create(model=MODEL, input=items, tools=tools)
        calls = [o for o in first.output if o.type == "function_call"]
        if not calls:
            return [], ""
        items += [o.model_dump(exclude_none=True) for o in first.output]
        items += [{"type": "function_call_output", "call_id": c.call_id, "output": output} for c in calls]
        second = self.client.responses.create(model=MODEL, input=items, tools=tools)
        return [ToolCall(c.name, json.loads(c.arguments)) for c in calls], str(second.output_text)

    def stream(self, prompt: str) -> str:
        events = self.client.responses.create(model=MODEL, input=prompt, stream=True)
        return "".join(e.delta for e in events if e.type == "response.output_text.delta")


SDK_DRIVERS: dict[str, type[Any]] = {
    "openai-chat": OpenAIChatDriver,
    "anthropic-messages": AnthropicDriver,
    "openai-responses": OpenAIResponsesDriver,
}
"""The dialects the kit drives with an official SDK, by dialect name."""


def _text(blocks: Sequence[Any]) -> str:
    return "".join(b.text for b in blocks if b.type == "text")


@dataclass
class Recorded:
    """A proxy session serving scripted replies: where it is, and what it recorded."""

    url: str
    api_key: str
    tokenizer: Any
    records: list[CallRecord]


@contextmanager
def recording_proxy(dialect: Any, replies: Sequence[str]) -> Iterator[Recorded]:
    """A started proxy serving ``dialect`` over the scripted policy (the tiny byte-level
    tokenizer), one session open; ``records`` fills from the proxy's ``on_call``."""
    for package in ("tokenizers", "jinja2"):
        need(package, "the scripted policy of the dialect contracts (its tiny tokenizer)")
    from lego_rl.testing.scripted_inference import scripted_proxy

    records: list[CallRecord] = []
    with scripted_proxy({dialect.name: dialect}, replies, on_call=records.append) as (
        server,
        session,
        inference,
    ):
        yield Recorded(session.base_url(server.url), session.api_key, inference.tokenizer, records)
