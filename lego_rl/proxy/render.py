"""Render a chat request into prompt token ids, reusing the previous call's tokens verbatim.

The policy's chat template (the tokenizer's own, or a Jinja file/string) turns the
dialect-neutral messages into text. When the decoded text of the previous call's prompt +
completion is a prefix of that text, the new prompt is exactly those previous ids followed
by the tokens of the remaining text: the sampled tokens are never re-tokenized, and the call
"extends" the previous one. Otherwise the whole text is tokenized afresh.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lego_rl.data import CallRecord
from lego_rl.kinds import ChatMessage, ChatRequest
from lego_rl.proxy.errors import BadRequest


@dataclass
class RenderedPrompt:
    ids: list[int]
    extends_previous: bool
    text: str


def load_template(chat_template: str) -> str | None:
    """Jinja source for ``chat_template``: inline Jinja, a template file, or None for a name
    (e.g. "qwen3"), meaning the tokenizer's own template."""
    if "{%" in chat_template or "{{" in chat_template:
        return chat_template
    path = Path(chat_template).expanduser()
    if path.is_file():
        return path.read_text()
    if path.suffix in {".jinja", ".j2"} or "/" in chat_template:
        raise FileNotFoundError(
            f"chat template file {chat_template!r} not found; give an existing Jinja file or a "
            "template name such as 'qwen3' (model.chat_template in the spec)"
        )
    return None


def _template_arguments(arguments: Any) -> Any:
    """Tool-call arguments as templates expect them: a dict when the JSON string parses."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
        return parsed if isinstance(parsed, dict) else arguments
    return arguments


def template_message(message: ChatMessage) -> dict[str, Any]:
    """A neutral message as a Hugging Face chat template sees it."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.reasoning:
        out["reasoning_content"] = message.reasoning
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.get("id", ""),
                "type": "function",
                "function": {
                    "name": call["function"]["name"],
                    "arguments": _template_arguments(call["function"].get("arguments", {})),
                },
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    if message.name:
        out["name"] = message.name
    return out


def _template_errors() -> tuple[type[Exception], ...]:
    try:
        from jinja2 import TemplateError
    except ImportError:
        return ()
    return (TemplateError,)


def render_text(tokenizer: Any, request: ChatRequest, template: str | None = None) -> str:
    """The prompt text, ending with the generation prompt of the assistant turn.

    A template that rejects the messages (``raise_exception`` in Jinja) is a BadRequest."""
    try:
        return tokenizer.apply_chat_template(
            [template_message(m) for m in request.messages],
            tools=request.tools or None,
            chat_template=template,
            tokenize=False,
            add_generation_prompt=True,
        )
    except _template_errors() as exc:
        raise BadRequest(
            f"the chat template rejected the messages: {exc}", param="messages"
        ) from exc


def encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False)) if text else []


def decode(tokenizer: Any, ids: Sequence[int]) -> str:
    return tokenizer.decode(
        list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
    )


def render_prompt(
    tokenizer: Any,
    request: ChatRequest,
    previous: CallRecord | None = None,
    template: str | None = None,
) -> RenderedPrompt:
    """Prompt ids for ``request``, reusing ``previous`` prompt (+ completion) ids when they are
    a textual prefix. Reusing the prompt alone keeps a retried call's ids identical."""
    text = render_text(tokenizer, request, template)
    if previous is not None:
        candidates = (
            (previous.prompt_ids + previous.completion_ids, True),
            (previous.prompt_ids, False),
        )
        for base, extends in candidates:
            prefix = decode(tokenizer, base)
            if text.startswith(prefix):
                return RenderedPrompt(base + encode(tokenizer, text[len(prefix) :]), extends, text)
    return RenderedPrompt(encode(tokenizer, text), False, text)
