"""The openai-chat dialect: parsing requests, formatting replies and errors, registration."""

import json

import legorl_std.dialects.openai_chat as openai_chat
import pytest
from legorl_std import dialects
from pydantic import ValidationError

from lego_rl.kinds import ChatCompletion, ChatRequest, Dialect
from lego_rl.proxy.errors import BadRequest
from lego_rl.proxy.pipeline import read_request
from lego_rl.registry import Registry

dialect = openai_chat.OpenAIChatDialect()
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "bash", "arguments": '{"command": "ls"}'},
}


def test_satisfies_the_dialect_protocol():
    assert isinstance(dialect, Dialect)
    assert ("POST", "/v1/chat/completions") in dialect.routes


def test_parses_every_role_and_content_shape():
    req = dialect.parse(
        {
            "model": "m",
            "messages": [
                {"role": "developer", "content": "be brief"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "text", "text": "b"},
                    ],
                },
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [CALL],
                    "reasoning_content": "hm",
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "x.txt"},
            ],
            "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}],
            "tool_choice": "required",
        }
    )
    assert [m.role for m in req.messages] == ["system", "user", "assistant", "tool"]
    assert req.messages[1].content == "a\nb"
    assert req.messages[2].tool_calls == [CALL] and req.messages[2].reasoning == "hm"
    assert req.messages[2].content == ""
    assert req.messages[3].tool_call_id == "call_1"
    assert req.tools[0]["function"]["name"] == "bash" and req.model == "m" and not req.stream


def test_dict_arguments_become_a_json_string():
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": "f", "arguments": {"a": 1}},
    }
    req = dialect.parse({"messages": [{"role": "assistant", "tool_calls": [call]}]})
    assert req.messages[0].tool_calls[0]["function"]["arguments"] == '{"a": 1}'


def test_sampling_keeps_only_fields_the_request_sets():
    req = dialect.parse(
        {
            "messages": [{"role": "user", "content": "x"}],
            "max_tokens": 50,
            "max_completion_tokens": 20,
            "temperature": 0.2,
            "seed": 3,
        }
    )
    assert req.sampling.model_fields_set == {"max_tokens", "temperature", "seed"}
    assert req.sampling.max_tokens == 20
    bare = dialect.parse({"messages": [{"role": "user", "content": "x"}], "stream": True})
    assert bare.sampling.model_fields_set == set() and bare.stream


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages[0].content[0]",
        ),
        ({"messages": [{"role": "user", "content": "x"}], "n": 2}, "n"),
        (
            {"messages": [{"role": "user", "content": "x"}], "tool_choice": "always"},
            "tool_choice",
        ),
        (
            {
                "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "web"}],
            },
            "tools[0]",
        ),
        (
            {"messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
            "max_tokens",
        ),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"id": "c"}]}]},
            "messages[0].tool_calls[0]",
        ),
    ],
)
def test_bad_requests_name_the_offending_param(body, param):
    with pytest.raises(BadRequest) as info:
        dialect.parse(body)
    assert info.value.status == 400 and info.value.param == param


def test_format_with_tool_calls():
    completion = ChatCompletion(
        content="",
        reasoning="r",
        tool_calls=[CALL],
        finish_reason="tool_calls",
        prompt_tokens=7,
        completion_tokens=3,
    )
    out = dialect.format(ChatRequest(messages=[], model="tiny"), completion, "abc")
    assert (
        out["id"] == "chatcmpl-abc"
        and out["object"] == "chat.completion"
        and out["model"] == "tiny"
    )
    [choice] = out["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [CALL],
        "reasoning_content": "r",
    }
    assert out["usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": 3,
        "total_tokens": 10,
    }


def test_format_plain_text():
    out = dialect.format(ChatRequest(messages=[]), ChatCompletion(content="hi"), "x")
    assert out["choices"][0]["message"] == {"role": "assistant", "content": "hi"}


def test_error_shape():
    assert dialect.error(400, "too long", "context_length_exceeded") == {
        "error": {
            "message": "too long",
            "type": "invalid_request_error",
            "param": None,
            "code": "context_length_exceeded",
        }
    }
    assert dialect.error(500, "boom", "server_error")["error"]["type"] == "server_error"


def test_registers_through_the_registry():
    registry = Registry()
    registry.add_module(dialects, name="dialects-test")
    built = registry.build("dialect", "openai-chat", {})
    assert isinstance(built, openai_chat.OpenAIChatDialect)
    with pytest.raises(ValidationError):
        registry.build("dialect", "openai-chat", {"streaming": True})


TOOL_LIST = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def chat_body(turns: int, **fields) -> bytes:
    messages = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "fix"}]
    for n in range(turns):
        call = {"id": f"c{n}", "type": "function",
                "function": {"name": "bash", "arguments": '{"n": 123456789012345678901234567890}'}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": [{"type": "text", "text": f"out {n}"}]},
        ]
    return json.dumps({"model": "m", "messages": messages, "tools": TOOL_LIST} | fields).encode()


@pytest.mark.parametrize(
    "fields",
    [{}, {"stream": True, "stream_options": {"include_usage": True}},
     {"max_completion_tokens": 9, "stop": ["x", "y"], "tool_choice": "auto", "tools": None}],
    ids=["plain", "stream", "sampling"],
)
def test_a_body_read_as_texts_gives_the_request_a_full_read_gives(fields):
    dialect = openai_chat.OpenAIChatDialect()
    for turns in range(3):
        raw = chat_body(turns, **fields)
        fast, full = dialect.parse_body(raw, "s"), dialect.parse(json.loads(raw))
        assert fast is not None
        assert (fast.messages, fast.tools, fast.sampling, fast.model, fast.stream) == (
            full.messages, full.tools, full.sampling, full.model, full.stream
        )
        assert fast.raw == {k: v for k, v in full.raw.items() if k not in ("messages", "tools")}
    assert "123456789012345678901234567890" in fast.messages[2].tool_calls[0]["function"]["arguments"]
    assert dialect.memo.reused == 2 + 4  # turn 1 reuses 2 messages, turn 2 reuses 4


@pytest.mark.parametrize(
    "fields", [{"n": 2}, {"tool_choice": 3}, {"stop": ["a"] * 5}, {"model": 1}], ids=["n", "choice", "stop", "model"]
)
def test_a_wrong_field_is_reported_by_the_full_read_in_its_order(fields):
    raw = chat_body(1, **fields)
    dialect = openai_chat.OpenAIChatDialect()
    assert dialect.parse_body(raw, "s") is None
    with pytest.raises(BadRequest) as fast:
        read_request(dialect, raw, "s")
    with pytest.raises(BadRequest) as full:
        openai_chat.OpenAIChatDialect().parse(json.loads(raw))
    assert (fast.value.message, fast.value.param) == (full.value.message, full.value.param)
