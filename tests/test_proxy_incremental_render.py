"""Incremental rendering: extending an earlier rendering gives exactly the full render."""

import json

import pytest
from legorl_std.dialects.openai_chat import OpenAIChatDialect

from lego_rl.data import Sampling
from lego_rl.kinds import ChatMessage, ChatRequest
from lego_rl.proxy.fast.incremental_render import IncrementalRenderer
from lego_rl.proxy.pipeline import CallHandler
from lego_rl.proxy.render import render_text
from lego_rl.proxy.session import ProxySession
from lego_rl.testing.scripted_inference import ScriptedInference
from lego_rl.tiny_tokenizer import TinyChatTokenizer, tiny_chat_tokenizer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"Run {name}.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
    for name in ("bash", "read")
]

# Drops the reasoning of assistant turns before the last user query, as Qwen3's own template
# does: a new user message changes how earlier messages render (not local).
DROPS_OLD_REASONING = (
    "{%- set ns = namespace(last=-1) -%}"
    "{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last = loop.index0 -%}"
    "{%- endif -%}{%- endfor -%}"
    "{%- for m in messages -%}"
    "{{- '<|im_start|>' ~ m.role ~ '\\n' -}}"
    "{%- if m.role == 'assistant' and m.reasoning_content and loop.index0 > ns.last -%}"
    "{{- '<think>' ~ m.reasoning_content ~ '</think>' -}}{%- endif -%}"
    "{{- m.content ~ '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def qwen3_template() -> str:
    return pytest.importorskip("legorl_embedded.policy.chat_template").source()


def call(i: int, name: str = "bash") -> dict:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps({"command": f"ls {i}"})},
    }


def agent_turns() -> list[list[ChatMessage]]:
    """What each call of an agent session adds: reasoning, tool calls (one and parallel), tool
    results, text replies, a new user query, a mid-conversation system message."""
    return [
        [ChatMessage("system", "You are a coding agent."), ChatMessage("user", "Fix the bug.")],
        [
            ChatMessage("assistant", "Let me look.", reasoning="Start by listing.", tool_calls=[call(1)]),
            ChatMessage("tool", "a.py b.py", tool_call_id="call_1"),
        ],
        [
            ChatMessage("assistant", "", reasoning="Read both.", tool_calls=[call(2, "read"), call(3)]),
            ChatMessage("tool", "print(1)", tool_call_id="call_2"),
            ChatMessage("tool", "ok", tool_call_id="call_3"),
        ],
        [
            ChatMessage("assistant", "", tool_calls=[call(4)]),
            ChatMessage("tool", "tests pass", tool_call_id="call_4"),
        ],
        [ChatMessage("assistant", "Fixed."), ChatMessage("user", "Now add a test.")],
        [
            ChatMessage("assistant", "On it.", reasoning="Write tests.", tool_calls=[call(5)]),
            ChatMessage("tool", "written", tool_call_id="call_5"),
            ChatMessage("system", "Reminder: keep it short."),
        ],
        [ChatMessage("assistant", "Done."), ChatMessage("user", "Thanks.")],
    ]


def drive(renderer: IncrementalRenderer, tok, template, tools) -> list[bool]:
    """Render each turn incrementally; every text must equal the full render."""
    messages: list[ChatMessage] = []
    rendering = None
    for added in agent_turns():
        messages = messages + added
        request = ChatRequest(messages=list(messages), tools=tools)
        text, rendering = renderer.render(request, [rendering])
        assert text == render_text(tok, request, template)
    return [renderer.verdicts[k] for k in renderer.verdicts]


@pytest.mark.parametrize("tools", [TOOLS, []])
def test_qwen3_template_renders_incrementally_and_exactly(tools):
    template = qwen3_template()
    tok = TinyChatTokenizer(template)
    renderer = IncrementalRenderer(tok, None, check_every=0)
    verdicts = drive(renderer, tok, None, tools)
    assert renderer.counts["incremental"] == len(agent_turns()) - 1
    assert renderer.counts["mismatches"] == 0 and all(verdicts)


def test_incremental_output_is_trusted_after_one_check():
    """A verified kind of step is not checked again: the incremental text stands alone."""
    tok = TinyChatTokenizer(qwen3_template())
    renderer = IncrementalRenderer(tok, None, check_every=0)
    base = [ChatMessage("system", "s"), ChatMessage("user", "u")]
    step = [ChatMessage("assistant", "", tool_calls=[call(1)]), ChatMessage("tool", "r")]
    rendering = None
    messages = base
    for turn in range(6):
        request = ChatRequest(messages=list(messages), tools=TOOLS)
        text, rendering = renderer.render(request, [rendering])
        assert text == render_text(tok, request, None)
        messages = messages + step
    assert renderer.counts["checks"] < renderer.counts["incremental"] == 5


def test_a_template_that_is_not_local_falls_back_to_the_full_render():
    tok = TinyChatTokenizer(DROPS_OLD_REASONING)
    renderer = IncrementalRenderer(tok, None, check_every=0)
    verdicts = drive(renderer, tok, None, [])
    assert renderer.counts["mismatches"] >= 1 and False in verdicts


def test_changed_history_or_tools_renders_in_full():
    tok = tiny_chat_tokenizer()
    renderer = IncrementalRenderer(tok)
    first = ChatRequest(messages=[ChatMessage("user", "a")], tools=TOOLS)
    _, rendering = renderer.render(first)
    edited = ChatRequest(
        messages=[ChatMessage("user", "b"), ChatMessage("assistant", "x"), ChatMessage("user", "c")],
        tools=TOOLS,
    )
    other_tools = ChatRequest(
        messages=[ChatMessage("user", "a"), ChatMessage("assistant", "x")], tools=TOOLS[:1]
    )
    for request in (edited, other_tools):
        text, _ = renderer.render(request, [rendering])
        assert text == render_text(tok, request)
    assert renderer.counts == {"full": 3, "incremental": 0, "checks": 0, "mismatches": 0}
    # A retry (the same messages again) needs no rendering at all.
    text, again = renderer.render(first, [rendering])
    assert text == render_text(tok, first) and again is rendering and renderer.counts["full"] == 3


def test_a_session_renders_its_later_turns_incrementally():
    tok = tiny_chat_tokenizer()
    replies = ["Hello.", "Sure.", "Bye."]
    handler = CallHandler(ScriptedInference(tok, replies), "policy", 8192)
    session = ProxySession("s", "openai-chat", Sampling(max_tokens=64))
    dialect = OpenAIChatDialect()
    messages = [{"role": "user", "content": "hi"}]
    for _ in replies:
        reply = handler.handle(session, dialect, {"messages": messages})
        messages += [reply["choices"][0]["message"], {"role": "user", "content": "more"}]
    assert handler.renderer.counts["incremental"] == 2
    assert all(c.extends_previous for c in session.calls[1:])
    [segment] = session.trajectory().segments
    assert segment.calls == [0, 1, 2]
