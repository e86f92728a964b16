"""A body read as texts (``parse_body``) gives the request a full read gives, on random
conversations of every dialect that grow, retry, lose or change earlier items, change their JSON
spacing, and interleave two sessions sharing one dialect (so its memos serve both)."""

import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from legorl_std.dialects.anthropic import AnthropicDialect
from legorl_std.dialects.openai_chat import OpenAIChatDialect
from legorl_std.dialects.openai_responses import OpenAIResponsesDialect

BIG = "123456789012345678901234567890"


def text(rng: random.Random) -> str:
    return rng.choice(["", "ok", "a\nb", "ünï ✓", f"n={BIG}", "x" * rng.randint(1, 40)])


def arguments(rng: random.Random) -> str:
    return rng.choice(['{"n": %s}' % BIG, '{"cmd": "ls"}', "{}", '{"a": 1.0, "b": [true]}'])


def responses_item(rng: random.Random, n: int) -> dict[str, Any]:
    parts = [{"type": "input_text", "text": text(rng)} for _ in range(rng.randint(1, 2))]
    return rng.choice(
        [
            {"type": "message", "role": rng.choice(["user", "developer"]), "content": parts},
            {"role": "user", "content": text(rng)},
            {"type": "reasoning", "id": f"rs{n}", "summary": [{"type": "summary_text", "text": text(rng)}]},
            {"type": "reasoning", "content": [{"type": "reasoning_text", "text": text(rng)}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text(rng)}]},
            {"type": "function_call", "call_id": f"c{n}", "name": "shell", "arguments": arguments(rng)},
            {"type": "function_call_output", "call_id": f"c{n}", "output": text(rng)},
            {"type": "function_call_output", "call_id": f"c{n}", "output": [{"type": "input_text", "text": text(rng)}]},
        ]
    )


def chat_message(rng: random.Random, n: int) -> dict[str, Any]:
    calls = [
        {"id": f"c{n}{k}", "type": "function", "function": {"name": "shell", "arguments": arguments(rng)}}
        for k in range(rng.randint(1, 2))
    ]
    return rng.choice(
        [
            {"role": rng.choice(["system", "developer", "user"]), "content": text(rng)},
            {"role": "user", "content": [{"type": "text", "text": text(rng)}]},
            {"role": "assistant", "content": text(rng)},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "assistant", "content": text(rng), "reasoning_content": text(rng), "tool_calls": calls},
            {"role": "tool", "tool_call_id": f"c{n}0", "content": text(rng)},
        ]
    )


def anthropic_message(rng: random.Random, n: int) -> dict[str, Any]:
    result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": rng.choice([text(rng), [{"type": "text", "text": text(rng)}]])}
    use = {"type": "tool_use", "id": f"t{n}", "name": "shell", "input": json.loads(arguments(rng))}
    thinking = {"type": "thinking", "thinking": text(rng), "signature": "s"}
    return rng.choice(
        [
            {"role": "user", "content": text(rng)},
            {"role": "user", "content": [result, {"type": "text", "text": text(rng)}]},
            {"role": "user", "content": [result]},
            {"role": "assistant", "content": [thinking, {"type": "text", "text": text(rng)}, use]},
            {"role": "assistant", "content": text(rng)},
            {"role": "system", "content": text(rng)},
        ]
    )


TOOL = {"name": "shell", "description": "Run", "input_schema": {"type": "object"}}
DIALECTS: dict[str, tuple[Callable[[], Any], str, Callable[[random.Random, int], dict], dict]] = {
    "openai-responses": (
        OpenAIResponsesDialect,
        "input",
        responses_item,
        {"tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
         "instructions": "Be brief.", "store": False},
    ),
    "openai-chat": (
        OpenAIChatDialect,
        "messages",
        chat_message,
        {"tools": [{"type": "function", "function": {"name": "shell", "parameters": {}}}]},
    ),
    "anthropic-messages": (
        AnthropicDialect,
        "messages",
        anthropic_message,
        {"tools": [TOOL], "system": [{"type": "text", "text": "Be brief."}], "max_tokens": 64},
    ),
}


def step(rng: random.Random, items: list[dict], make: Callable[[random.Random, int], dict]) -> None:
    """What a harness does to its history before its next call."""
    roll, n = rng.random(), len(items)
    if roll < 0.6 or n < 2:
        items += [make(rng, n + k) for k in range(rng.randint(1, 3))]
    elif roll < 0.7:
        pass  # a retry: the same conversation again
    elif roll < 0.8:
        del items[rng.randint(1, n - 1) :]  # truncated
    elif roll < 0.9:
        items[rng.randrange(n)] = make(rng, rng.randrange(100))  # an earlier item changed
    else:
        del items[rng.randrange(n)]  # an earlier item dropped


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_random_histories_read_as_texts_as_in_full(name):
    build, field, make, shared = DIALECTS[name]
    rng = random.Random(name)
    dialect = build()
    sessions: dict[str, list[dict]] = {"a": [], "b": []}
    for _ in range(300):
        scope = rng.choice("ab")
        items = sessions[scope]
        step(rng, items, make)
        separators = rng.choice([(", ", ": "), (",", ":")])
        raw = json.dumps({"model": "m", field: items, **shared}, separators=separators).encode()
        fast = dialect.parse_body(raw, scope)
        full = build().parse(json.loads(raw))
        assert fast is not None
        assert (fast.messages, fast.tools, fast.sampling, fast.model, fast.stream) == (
            full.messages, full.tools, full.sampling, full.model, full.stream
        )
    assert dialect.memo.reused > 1000  # the memo served most items
