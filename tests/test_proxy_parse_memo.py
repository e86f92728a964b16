"""MessageMemo: a growing conversation parses only its new messages, exactly as a fresh parse."""

from __future__ import annotations

import copy
import json

import pytest
from legorl_std.dialects.anthropic import AnthropicDialect

from lego_rl.kinds import ChatMessage
from lego_rl.proxy.errors import BadRequest
from lego_rl.proxy.fast.parse_memo import MessageMemo


def turn(n: int, tool_input: dict) -> list[dict]:
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": f"plan {n}", "signature": "s"},
                {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": tool_input},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"out {n}"}
            ],
        },
    ]


def body(messages: list[dict]) -> dict:
    """A fresh JSON body, as the server decodes one per request."""
    return json.loads(json.dumps({"model": "m", "system": "sys", "messages": messages}))


def test_growing_conversation_reuses_its_prefix_and_parses_like_a_fresh_dialect():
    memo_dialect = AnthropicDialect()
    messages: list[dict] = [{"role": "user", "content": "fix the bug"}]
    for n in range(6):
        request = memo_dialect.parse(body(messages))
        assert request.messages == AnthropicDialect().parse(body(messages)).messages
        messages += turn(n, {"command": f"ls {n}", "timeout": 5, "background": False})
    memo = memo_dialect.memo
    # Turn n re-sends 1 + 2n messages, all but the 2 new ones reused: 25 of 36 over 6 turns.
    assert (memo.reused, memo.parsed) == (25, 11)
    assert len(memo.entries) == 1  # the conversation's entry follows its latest call


@pytest.mark.parametrize(
    "changed",
    [
        {"command": "ls", "timeout": True},  # True == 1 in Python
        {"command": "ls", "timeout": 1.0},  # 1.0 == 1
        {"timeout": 1, "command": "ls"},  # same dict, other key order
        {"command": "ls", "timeout": -0.0},  # -0.0 == 0.0 (the cached one holds 0.0 here)
    ],
    ids=["bool-for-int", "float-for-int", "key-order", "negative-zero"],
)
def test_a_message_equal_only_in_python_is_parsed_again(changed):
    dialect = AnthropicDialect()
    timeout = 0.0 if changed.get("timeout") == 0 else 1
    first = [{"role": "user", "content": "go"}, *turn(0, {"command": "ls", "timeout": timeout})]
    cached = dialect.parse(body(first)).messages
    second = copy.deepcopy(first)
    second[1]["content"][1]["input"] = changed
    assert second == first  # equal as Python values, yet not the same JSON
    again = dialect.parse(body(second)).messages
    assert again == AnthropicDialect().parse(body(second)).messages
    assert again[2].tool_calls != cached[2].tool_calls  # not the cached arguments string


def test_a_bad_new_message_after_a_cached_prefix_names_its_own_index():
    dialect = AnthropicDialect()
    messages: list[dict] = [{"role": "user", "content": "go"}, *turn(0, {"command": "ls"})]
    dialect.parse(body(messages))
    with pytest.raises(BadRequest) as info:
        dialect.parse(body([*messages, {"role": "robot", "content": "x"}]))
    assert info.value.param == "messages[3].role"


def test_sessions_sharing_a_first_message_keep_their_own_entries():
    dialect = AnthropicDialect()
    start = [{"role": "user", "content": "same task"}]
    a, b = [*start, *turn(0, {"command": "a"})], [*start, *turn(1, {"command": "b"})]
    for messages in (start, start, a, b, a + turn(2, {"command": "a2"})):
        assert (
            dialect.parse(body(messages)).messages
            == AnthropicDialect().parse(body(messages)).messages
        )
    memo = dialect.memo
    # start: parsed; start again: reused; a: 1 reused; b: the first message's entry moved on
    # with a, so parsed afresh; a's next turn reuses all 3 of a.
    assert (memo.reused, memo.parsed) == (5, 8)
    assert len(memo.entries) == 2


def test_the_memo_keeps_conversations_within_its_byte_budget():
    dialect = AnthropicDialect()
    dialect.parse(body([{"role": "user", "content": "task 0"}]))
    one = dialect.memo.entries.nbytes
    dialect.memo.entries.budget = 3 * one
    for n in range(1, 5):
        dialect.parse(body([{"role": "user", "content": f"task {n}"}]))
    assert [text for _, text in dialect.memo.entries.entries] == [
        b'{"role":"user","content":"task %d"}' % n for n in (2, 3, 4)
    ]
    assert dialect.memo.entries.nbytes == 3 * one <= dialect.memo.entries.budget


def array_memo() -> MessageMemo:
    return MessageMemo(lambda raw, i: [ChatMessage("user", json.dumps(raw))])


def contents(messages: list[ChatMessage] | None) -> list:
    return [json.loads(m.content) for m in messages or []]


def test_an_array_that_starts_with_an_earlier_one_reads_only_its_new_items():
    memo = array_memo()
    assert contents(memo.parse_array(b'[{"a": 1}, "x" ]')) == [{"a": 1}, "x"]
    assert contents(memo.parse_array(b'[{"a": 1}, "x" , 3,4]')) == [{"a": 1}, "x", 3, 4]
    assert (memo.reused, memo.parsed) == (2, 4) and len(memo.arrays) == 1
    assert contents(memo.parse_array(b'[{"a": 1}, "x" , 3,4]')) == [{"a": 1}, "x", 3, 4]  # retry
    assert (memo.reused, memo.parsed, len(memo.arrays)) == (6, 4, 1)


def test_an_array_whose_last_known_item_grew_is_read_afresh():
    memo = array_memo()
    memo.parse_array(b"[1, 2]")
    assert contents(memo.parse_array(b"[1, 23]")) == [1, 23]  # not 1, 2, 3
    assert contents(memo.parse_array(b'[1, 2, "\\u00e9"]')) == [1, 2, "é"]
    assert contents(memo.parse_array(b"[1, 2]")) == [1, 2]
    assert memo.parse_array(b"[]") is None and memo.parse_array(b"{}") is None


def test_arrays_held_stay_within_the_memo_budget_and_four_a_scope():
    memo = MessageMemo(lambda raw, i: [ChatMessage("user", str(raw))], budget=3 * 3000)
    for n in range(6):
        memo.parse_array(json.dumps([f"conversation {n}" + " " * 600, n]).encode())
    assert len(memo.arrays) == 3 and memo.arrays.nbytes <= 3 * 3000
    assert memo.arrays.nbytes == sum(e.nbytes for e in memo.arrays.entries.values())
    memo = array_memo()
    for n in range(6):
        memo.parse_array(json.dumps([f"conversation {n}", n]).encode(), "session")
    assert len(memo.arrays.scoped("session")) == 4
    assert memo.parse_array(b"[1, 2, tru]") is None  # not JSON: the caller's full read says why
