"""Our "qwen3" chat template (``chat_template.jinja``) rendered in plain Python.

Jinja spends ~20 us on a render's set-up and ~20 us a message (hot; 4-5x that when a call wakes
an idle CPU, as a proxy call does), more than the proxy's other work on a turn. Importing this
module registers the renderer for the template's exact source
(:mod:`lego_rl.proxy.native_templates`): the proxy compares it with Jinja on its first renders
and every so often after, and falls back to Jinja for good on a disagreement. Input is what
Jinja gets: Hugging Face chat messages (dicts), tools, the generation-prompt flag; anything
outside what the proxy sends (content that is not a string, tool calls without a name) returns
None, and Jinja renders it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from typing import Any

from lego_rl.proxy.native_templates import register_native_template

TOOLS_HEAD = (
    "# Tools\n\nYou can call the functions described below to help with the request.\n\n"
    "Function signatures, one JSON object per line, inside <tools></tools> XML tags:\n<tools>"
)
TOOLS_TAIL = (
    "\n</tools>\n\nTo call a function, write a JSON object with its name and arguments "
    "between <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


class Outside(Exception):
    """The input is not what this renderer takes: Jinja renders it."""


def source() -> str:
    """The Jinja source this module renders."""
    return resources.files("legorl_embedded.policy").joinpath("chat_template.jinja").read_text()


def tojson(value: Any) -> str:
    """Jinja's ``tojson`` as transformers defines it."""
    return json.dumps(value, ensure_ascii=False)


def _text(content: Any) -> str:
    if not isinstance(content, str):
        raise Outside
    return content


def _tool_call(call: dict[str, Any]) -> str:
    fn = call.get("function", call)
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise Outside
    name, arguments = fn["name"], fn.get("arguments")
    if not isinstance(arguments, str):
        arguments = tojson({} if arguments is None else arguments)
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


def _assistant(message: dict[str, Any]) -> str:
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    content = _text(message.get("content"))
    if not isinstance(reasoning, str):
        raise Outside
    out = ["<|im_start|>assistant\n"]
    if reasoning:
        out.append("<think>\n" + reasoning.strip("\n") + "\n</think>\n\n")
    out.append(content)
    for i, call in enumerate(message.get("tool_calls") or []):
        if content or i:
            out.append("\n")
        out.append(_tool_call(call))
    out.append("<|im_end|>\n")
    return "".join(out)


def render(
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]] | None,
    add_generation_prompt: bool,
) -> str | None:
    """The template's text for these arguments, or None where Jinja has to render them."""
    try:
        return _render(messages, tools, add_generation_prompt)
    except (Outside, LookupError, TypeError, ValueError, AttributeError):
        return None


def _render(
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]] | None,
    add_generation_prompt: bool,
) -> str:
    roles = [m["role"] for m in messages]
    if not messages or not all(isinstance(r, str) for r in roles):
        raise Outside
    has_system = bool(messages) and roles[0] == "system"
    out: list[str] = []
    if tools or has_system:
        out.append("<|im_start|>system\n")
        if has_system:
            out.append(_text(messages[0].get("content")))
        if tools:
            if has_system:
                out.append("\n\n")
            out.append(TOOLS_HEAD)
            out.extend("\n" + tojson(tool) for tool in tools)
            out.append(TOOLS_TAIL)
        out.append("<|im_end|>\n")
    last = len(messages) - 1
    for i, message in enumerate(messages):
        role = roles[i]
        if i == 0 and has_system:
            continue
        if role == "tool":
            if i == 0 or roles[i - 1] != "tool":
                out.append("<|im_start|>user")
            out.append("\n<tool_response>\n" + _text(message.get("content")) + "\n</tool_response>")
            if i == last or roles[i + 1] != "tool":
                out.append("<|im_end|>\n")
        elif role == "assistant":
            out.append(_assistant(message))
        else:
            out.append(f"<|im_start|>{role}\n{_text(message.get('content'))}<|im_end|>\n")
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
    return "".join(out)


register_native_template(source(), render)
