"""Prompt rendering with prefix reuse: sampled tokens are reused verbatim, never re-tokenized."""

import json

import pytest

from lego_rl.data import CallRecord
from lego_rl.kinds import ChatMessage, ChatRequest
from lego_rl.proxy.errors import BadRequest
from lego_rl.proxy.render import (
    Context,
    PrefixCache,
    decode,
    encode,
    load_template,
    render_prompt,
    template_message,
)
from lego_rl.tiny_tokenizer import TINY_CHAT_TEMPLATE, tiny_chat_tokenizer, tiny_hf_tokenizer


@pytest.fixture(scope="module")
def tok():
    return tiny_chat_tokenizer()


def request(*messages):
    return ChatRequest(messages=list(messages))


def record(prompt, completion):
    """The context a call with these ids left behind."""
    call = CallRecord(
        session="s",
        index=0,
        dialect="d",
        prompt_ids=prompt,
        completion_ids=completion,
        logprobs=[0.0] * len(completion),
    )
    return Context.of(tiny_chat_tokenizer(), call)


def test_first_call_tokenizes_the_rendered_text(tok):
    rendered = render_prompt(tok, request(ChatMessage("user", "hi")))
    assert rendered.text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert list(rendered.ids) == encode(tok, rendered.text)
    assert not rendered.extends_previous


def test_next_turn_reuses_the_sampled_ids_verbatim(tok):
    first = render_prompt(tok, request(ChatMessage("user", "hi")))
    # The policy spelled "<think>" byte by byte: a tokenization the tokenizer itself never makes.
    sampled = encode(tok, "<think") + encode(tok, ">x</think>Hello") + [tok.eos_token_id]
    assert encode(tok, decode(tok, sampled)) != sampled
    prev = record(first.ids, sampled)
    follow = request(
        ChatMessage("user", "hi"),
        ChatMessage("assistant", "Hello", reasoning="x"),
        ChatMessage("user", "more"),
    )
    # The tiny template renders reasoning differently than the policy wrote it: a rewrite.
    assert not render_prompt(tok, follow, prev).extends_previous
    # Same content without reasoning in the history and in the sample: extension.
    sampled = encode(tok, "Hel") + encode(tok, "lo") + [tok.eos_token_id]
    prev = record(first.ids, sampled)
    follow = request(
        ChatMessage("user", "hi"),
        ChatMessage("assistant", "Hello"),
        ChatMessage("user", "more"),
    )
    rendered = render_prompt(tok, follow, prev)
    assert rendered.extends_previous
    assert list(rendered.ids[: len(first.ids) + len(sampled)]) == [*first.ids, *sampled]
    assert decode(tok, rendered.ids) == rendered.text


def test_tool_call_round_trip_extends(tok):
    tools = [
        {
            "type": "function",
            "function": {"name": "bash", "parameters": {"type": "object"}},
        }
    ]
    first_req = ChatRequest(messages=[ChatMessage("user", "list")], tools=tools)
    first = render_prompt(tok, first_req)
    text = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    sampled = encode(tok, text) + [tok.eos_token_id]
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})},
    }
    follow = ChatRequest(
        messages=[
            ChatMessage("user", "list"),
            ChatMessage("assistant", "", tool_calls=[call]),
            ChatMessage("tool", "a.txt", tool_call_id="call_1"),
        ],
        tools=tools,
    )
    rendered = render_prompt(tok, follow, record(first.ids, sampled))
    assert rendered.extends_previous
    assert list(rendered.ids[: len(first.ids) + len(sampled)]) == [*first.ids, *sampled]


def test_retry_reuses_the_previous_prompt_ids(tok):
    req = request(ChatMessage("user", "hi"))
    odd_prompt = encode(tok, "<|im_start") + encode(
        tok, "|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    rendered = render_prompt(tok, req, record(odd_prompt, encode(tok, "Hello")))
    assert list(rendered.ids) == odd_prompt and not rendered.extends_previous


def test_unrelated_history_is_tokenized_afresh(tok):
    prev = record(encode(tok, "<|im_start|>user\nsomething else"), encode(tok, "x"))
    rendered = render_prompt(tok, request(ChatMessage("user", "hi")), prev)
    assert list(rendered.ids) == encode(tok, rendered.text) and not rendered.extends_previous


def test_load_template(tmp_path):
    assert load_template("qwen3") is None
    assert load_template(TINY_CHAT_TEMPLATE) == TINY_CHAT_TEMPLATE
    path = tmp_path / "t.jinja"
    path.write_text("{{ messages }}")
    assert load_template(str(path)) == "{{ messages }}"
    with pytest.raises(FileNotFoundError, match="chat template file"):
        load_template(str(tmp_path / "missing.jinja"))


def test_template_message_passes_parsed_arguments():
    msg = ChatMessage(
        "assistant",
        "",
        tool_calls=[
            {
                "id": "c",
                "type": "function",
                "function": {"name": "f", "arguments": '{"a": 1}'},
            },
            {
                "id": "d",
                "type": "function",
                "function": {"name": "g", "arguments": "not json"},
            },
        ],
    )
    out = template_message(msg)
    assert [c["function"]["arguments"] for c in out["tool_calls"]] == [
        {"a": 1},
        "not json",
    ]


def test_a_template_that_rejects_the_messages_is_a_bad_request():
    strict = tiny_chat_tokenizer()
    strict.chat_template = "{{ raise_exception('no') if messages[0].role != 'system' else '' }}"
    with pytest.raises(BadRequest, match="chat template rejected"):
        render_prompt(strict, request(ChatMessage("user", "hi")))


@pytest.mark.slow
def test_the_double_renders_and_tokenizes_like_transformers(tok):
    hf = tiny_hf_tokenizer()
    tools = [
        {
            "type": "function",
            "function": {"name": "bash", "parameters": {"type": "object"}},
        }
    ]
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"command": "ls é"}'},
    }
    req = ChatRequest(
        messages=[
            ChatMessage("system", "sys"),
            ChatMessage("user", "hi <think>"),
            ChatMessage("assistant", "ok", reasoning="r", tool_calls=[call]),
            ChatMessage("tool", "out", tool_call_id="c"),
        ],
        tools=tools,
    )
    ours, theirs = render_prompt(tok, req), render_prompt(hf, req)
    assert ours.text == theirs.text and ours.ids == theirs.ids
    assert decode(tok, ours.ids) == decode(hf, theirs.ids) == ours.text


def test_prefix_cache_shares_the_first_turn_and_matches_plain_tokenization():
    tok = tiny_chat_tokenizer()
    cache = PrefixCache(tok)
    system = "<|im_start|>system\n" + "long system prompt " * 50 + "<|im_end|>"
    texts = [f"{system}\n<|im_start|>user\ntask {i}<|im_end|>\n" for i in range(3)]
    assert [list(cache.encode(t)) for t in texts] == [encode(tok, t) for t in texts]
    assert (cache.hits, cache.misses) == (2, 1)
    assert list(cache.encode("no marker here")) == encode(tok, "no marker here")


def test_a_new_tokenizer_renders_its_first_template_alone_whatever_its_id():
    """Tokenizers freed and made again often get the same id: the first-render lock is kept
    per tokenizer object, so a fresh one is never taken for one that rendered before."""
    from lego_rl.proxy import render

    class Plain:
        def apply_chat_template(self, messages, **kwargs) -> str:
            return "text"

    for _ in range(20):  # CPython hands a freed object's memory, and so its id, to the next
        tok = Plain()
        assert not render._rendered(tok, None)
        render.apply_template(tok, [ChatMessage(role="user", content="hi")], [], None, True)
        assert render._rendered(tok, None)
        del tok
