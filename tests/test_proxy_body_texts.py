"""Bodies read as texts (AnthropicDialect.parse_body): the request a full read gives, or None
where the full read must say what is wrong; earlier texts are recognised, not parsed."""

from __future__ import annotations

import json

import pytest
from legorl_std.dialects.anthropic import AnthropicDialect

from lego_rl.proxy import jsonio
from lego_rl.proxy.budgets import size_of
from lego_rl.proxy.errors import BadRequest
from lego_rl.proxy.fast.body_texts import TextMemo, field_texts, item_texts
from lego_rl.proxy.pipeline import read_request

TOOLS = [{"name": "Bash", "description": "Run.", "input_schema": {"type": "object"}}]


def messages(turns: int, tool_input: str = '{"command": "ls"}') -> str:
    out = ['{"role": "user", "content": [{"type": "text", "text": "Fix it. \\u00e9 \\ud83d\\ude00"}]}']
    for n in range(turns):
        out.append(
            '{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_%d", '
            '"name": "Bash", "input": %s}]}' % (n, tool_input)
        )
        out.append(
            '{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_%d", '
            '"content": "out %d"}]}' % (n, n)
        )
    return "[" + ",\n ".join(out) + "]"


def body(turns: int, **fields: str) -> bytes:
    parts = {
        "model": '"policy"',
        "max_tokens": "64",
        "system": '[{"type": "text", "text": "You are an agent."}]',
        "tools": json.dumps(TOOLS),
        "messages": messages(turns),
    } | fields
    return ("{" + ", ".join(f'"{k}": {v}' for k, v in parts.items() if v) + "}").encode()


def same_request(raw: bytes) -> None:
    fast = AnthropicDialect().parse_body(raw)
    full = AnthropicDialect().parse(json.loads(raw))
    assert fast is not None
    assert (fast.messages, fast.tools, fast.sampling, fast.model, fast.stream) == (
        full.messages, full.tools, full.sampling, full.model, full.stream
    )
    assert fast.raw == {k: v for k, v in full.raw.items() if k not in ("messages", "system", "tools")}


@pytest.mark.parametrize(
    "raw",
    [
        body(3),
        body(2, stream="true", temperature="0.5", tool_choice='{"type": "auto"}'),
        body(1, system='"plain"', tools="null"),
        body(1, system="", tools=""),  # both absent
        body(1, system='""'),
        # Exactness the full read keeps: an integer past 64 bits.
        body(1, messages=messages(1, '{"n": 123456789012345678901234567890}')),
    ],
    ids=["turns", "fields", "plain-system", "absent", "empty-system", "big-int"],
)
def test_parse_body_gives_the_request_a_full_read_gives(raw):
    same_request(raw)


def test_a_lone_surrogate_msgspec_refuses_is_read_in_full_and_kept():
    raw = body(1, messages=messages(1, '{"s": "\\ud800"}'))
    assert AnthropicDialect().parse_body(raw) is None
    request = read_request(AnthropicDialect(), raw)
    assert request.messages == AnthropicDialect().parse(json.loads(raw)).messages
    assert "\ud800" in request.messages[2].tool_calls[0]["function"]["arguments"]


def test_repeated_keys_keep_the_last_as_a_full_read_does():
    raw = b'{"model": "a", "messages": [{"role": "user", "content": "x"}], "model": "b"}'
    assert AnthropicDialect().parse_body(raw).model == json.loads(raw)["model"] == "b"


def test_an_exact_integer_survives_in_the_tool_input():
    raw = body(1, messages=messages(1, '{"n": 123456789012345678901234567890}'))
    request = AnthropicDialect().parse_body(raw)
    call = request.messages[2].tool_calls[0]
    assert "123456789012345678901234567890" in call["function"]["arguments"]


@pytest.mark.parametrize(
    "raw",
    [b"[1, 2]", b"{not json", b'{"messages": []}', b'{"messages": {}}', b'{"model": "m"}',
     b"\xff\xfe", b'{"messages": [{"role": "user", "content": "x"}]} trailing'],
    ids=["array", "not-json", "no-messages", "messages-object", "messages-absent", "not-utf8", "trailing"],
)
def test_what_the_texts_cannot_take_is_left_to_the_full_read(raw):
    assert AnthropicDialect().parse_body(raw) is None
    with pytest.raises(BadRequest):
        read_request(AnthropicDialect(), raw)


@pytest.mark.parametrize(
    "fields",
    [
        {"tools": '[{"type": "web_search", "name": "web"}]'},
        {"system": "5"},
        {"stream": '"yes"'},
        {"messages": '[{"role": "robot", "content": "x"}]'},
        {"max_tokens": "0"},
    ],
    ids=["server-tool", "system-number", "stream-string", "bad-role", "zero-max-tokens"],
)
def test_invalid_parts_are_the_same_bad_request(fields):
    raw = body(1, **fields)
    with pytest.raises(BadRequest) as fast:
        AnthropicDialect().parse_body(raw)
    with pytest.raises(BadRequest) as full:
        AnthropicDialect().parse(json.loads(raw))
    assert (fast.value.message, fast.value.param) == (full.value.message, full.value.param)


def test_a_growing_conversation_parses_only_what_is_new():
    dialect = AnthropicDialect()
    first = dialect.parse_body(body(2))
    again = dialect.parse_body(body(4))
    assert again.tools is first.tools  # the tool list text was seen: the same parse
    assert again.messages[1] is first.messages[1]  # so was the first message
    assert (dialect.memo.reused, dialect.memo.parsed) == (5, 9)


def test_texts_split_without_reading_inside():
    fields = field_texts(b'{"a": {"b": [1, 2.50]}, "c" : "x\\n"}')
    assert fields == {"a": b'{"b": [1, 2.50]}', "c": b'"x\\n"'}
    assert item_texts(b'[ {"x": 1} , 2 ]') == [b'{"x": 1}', b"2"]
    assert field_texts(b"[]") is None and item_texts(b"{}") is None


def test_text_memo_keeps_parses_by_text_and_not_failures():
    seen = []

    def parse(value):
        seen.append(value)
        if value == "bad":
            raise BadRequest("bad")
        return [value]

    memo = TextMemo(parse, budget=2 * (size_of(b'"a"') + size_of(["a"])))
    assert memo.get(b'"a"') is memo.get(b'"a"') and seen == ["a"]
    with pytest.raises(BadRequest):
        memo.get(b'"bad"')
    with pytest.raises(BadRequest):
        memo.get(b'"bad"')
    memo.get(b'"b"'), memo.get(b'"c"')
    assert list(memo.cache.entries) == [b'"b"', b'"c"'] and seen == ["a", "bad", "bad", "b", "c"]
    assert jsonio.loads(b'"a"') == "a"


def test_text_memo_answers_the_latest_text_first_and_takes_any_reader():
    seen = []

    def parse(value):
        seen.append(value)
        return dict(value)

    memo = TextMemo(parse, read=lambda items: [(k, jsonio.loads(t)) for k, t in items])
    a, b = (("model", b'"m"'), ("max_tokens", b"5")), (("model", b'"n"'),)
    first = memo.get(a)
    assert first == {"model": "m", "max_tokens": 5}
    assert memo.get(tuple(a)) is first and memo.get(b) == {"model": "n"} and memo.get(a) is first
    assert len(seen) == 2  # a again: from the entries, not parsed anew
