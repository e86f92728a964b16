"""Chat templates rendered in Python: our qwen3 template's renderer against Jinja, and the
checked twin that keeps such a renderer honest inside the proxy."""

from __future__ import annotations

import json
import random

import pytest

from lego_rl.kinds import ChatMessage
from lego_rl.proxy.native_templates import (
    TemplateTwin,
    register_native_template,
    template_twin,
)
from lego_rl.proxy.render import apply_template, template_message
from lego_rl.tiny_tokenizer import TinyChatTokenizer

qwen3 = pytest.importorskip("legorl_embedded.policy.chat_template")
chat_template_utils = pytest.importorskip("transformers.utils.chat_template_utils")

TEXTS = ["", "plain", "  padded \n", "\n\nlead", "trail\n\n", "ü 中文 \"q\" {x}", "<think>a</think>b"]
TOOLS = [
    {"type": "function", "function": {"name": "bash", "description": "Run ü", "parameters": {}}},
    {"type": "function", "function": {"name": "edit", "parameters": {"type": "object"}}},
]


def jinja(messages: list[dict], tools: list[dict] | None, generation_prompt: bool) -> str:
    """What transformers renders for our template's source."""
    rendered, _ = chat_template_utils.render_jinja_template(
        conversations=[messages],
        tools=tools,
        chat_template=qwen3.source(),
        add_generation_prompt=generation_prompt,
    )
    return rendered[0]


def random_message(draw: random.Random, i: int) -> ChatMessage:
    role = draw.choice(["user", "assistant", "assistant", "tool", "tool", "system"])
    text = draw.choice(TEXTS)
    if role == "assistant":
        calls = [
            {
                "id": f"call_{i}_{k}",
                "type": "function",
                "function": {
                    "name": draw.choice(["bash", "edit"]),
                    "arguments": draw.choice(
                        [json.dumps({"command": f"ls {k}", "n": [1, 2.5]}), "not json", "{}", "[1]"]
                    ),
                },
            }
            for k in range(draw.choice([0, 0, 1, 2]))
        ]
        return ChatMessage(role, text, reasoning=draw.choice(["", "", "\nthink\n"]), tool_calls=calls)
    if role == "tool":
        return ChatMessage(role, text, tool_call_id=f"call_{i}")
    return ChatMessage(role, text)


def test_the_python_renderer_renders_what_jinja_renders():
    draw = random.Random(7)
    for case in range(300):
        messages = [random_message(draw, i) for i in range(draw.randint(1, 7))]
        if draw.random() < 0.5:
            messages.insert(0, ChatMessage("system", draw.choice(TEXTS)))
        dicts = [template_message(m) for m in messages]
        tools = draw.choice([None, TOOLS])
        for generation_prompt in (False, True):
            expected = jinja(dicts, tools, generation_prompt)
            assert qwen3.render(dicts, tools, generation_prompt) == expected, (case, dicts)


def test_what_the_python_renderer_does_not_take_is_left_to_jinja():
    parts = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert qwen3.render(parts, None, True) is None
    assert qwen3.render([{"role": "user", "content": None}], None, True) is None
    assert qwen3.render([], None, True) is None
    no_name = {"role": "assistant", "content": "", "tool_calls": [{"function": {"arguments": "{}"}}]}
    assert qwen3.render([no_name], None, False) is None


def test_the_proxy_renders_our_template_with_its_twin_and_checks_it():
    tok = TinyChatTokenizer(qwen3.source())
    messages = [ChatMessage("system", "sys"), ChatMessage("user", "fix it")]
    first = apply_template(tok, messages, TOOLS, None, True)  # compiles through Jinja
    twin = template_twin(tok, None)
    assert twin is not None
    texts = [apply_template(tok, messages, TOOLS, None, True) for _ in range(20)]
    assert set(texts) == {first} == {tok.apply_chat_template(
        [template_message(m) for m in messages], TOOLS, tokenize=False, add_generation_prompt=True
    )}
    assert twin.counts["renders"] == 20 and twin.counts["checks"] == 8
    assert twin.counts["mismatches"] == 0 and twin.check.on


def test_a_twin_that_disagrees_with_jinja_is_turned_off():
    source = "{%- for m in messages -%}[{{ m.role }}:{{ m.content }}]{%- endfor -%}"
    calls = []

    def wrong(messages, tools, generation_prompt):
        calls.append(len(messages))
        return "".join(f"<{m['role']}:{m['content']}>" for m in messages)

    register_native_template(source, wrong)
    tok = TinyChatTokenizer(source)
    messages = [ChatMessage("user", "a"), ChatMessage("assistant", "b")]
    texts = {apply_template(tok, messages, [], None, False) for _ in range(5)}
    assert texts == {"[user:a][assistant:b]"}
    twin = template_twin(tok, None)
    assert twin is not None and not twin.check.on and twin.counts["mismatches"] == 1
    assert len(calls) == 1  # once off, the renderer is not asked again


def test_a_twin_that_declines_falls_back_without_a_check():
    twin = TemplateTwin(lambda messages, tools, generation_prompt: None, verify_first=0)
    assert twin.render([], None, False, lambda: "jinja") == "jinja"
    assert twin.counts["checks"] == 0 and twin.check.on


def test_unregistered_templates_have_no_twin():
    assert template_twin(TinyChatTokenizer("{{ messages | length }}"), None) is None
    assert template_twin(object(), None) is None
