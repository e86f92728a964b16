"""The anthropic-messages dialect with the official anthropic SDK as an unmodified client."""

import json
import time

import anthropic
import httpx
import pytest
from legorl_std.dialects.anthropic import AnthropicDialect

from lego_rl.kinds import Dialect
from lego_rl.testing.scripted_inference import scripted_proxy

TOOLS = [
    {
        "name": "Bash",
        "description": "Run a command",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
        },
    }
]
FIRST = (
    "<think>\nList them.\n</think>\n\nLet me look.\n"
    '<tool_call>\n{"name": "Bash", "arguments": {"command": "ls"}}\n</tool_call>'
)
SYSTEM = [
    {"type": "text", "text": "You are Claude Code."},
    {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
]
EXTRA = {
    "context_management": {"edits": []},
    "output_config": {"effort": "low"},
    "thinking": {"type": "enabled", "budget_tokens": 1024},
}


def client_for(server, session):
    return anthropic.Anthropic(
        base_url=session.base_url(server.url),
        api_key=session.api_key,
        max_retries=0,
        default_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"},
    )


def test_satisfies_the_protocol_and_parses_claude_code_shapes():
    dialect = AnthropicDialect()
    assert isinstance(dialect, Dialect)
    req = dialect.parse(
        {
            "model": "m",
            "system": SYSTEM,
            "max_tokens": 50,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "system", "content": "reminder"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hm", "signature": "x"},
                        {"type": "text", "text": "ok"},
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "Bash",
                            "input": {"a": 1},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_1",
                            "content": "out",
                        },
                        {"type": "text", "text": "next"},
                    ],
                },
            ],
            "tools": TOOLS,
            "metadata": {"user_id": "u"},
            **EXTRA,
        }
    )
    assert [m.role for m in req.messages] == [
        "system",
        "user",
        "system",
        "assistant",
        "tool",
        "user",
    ]
    assert req.messages[0].content == "You are Claude Code.\nBe brief."
    assistant = req.messages[3]
    assert (assistant.reasoning, assistant.content) == ("hm", "ok")
    assert assistant.tool_calls[0]["function"] == {
        "name": "Bash",
        "arguments": '{"a": 1}',
    }
    assert req.messages[4].tool_call_id == "toolu_1" and req.messages[4].content == "out"
    assert req.tools[0]["function"]["parameters"] == TOOLS[0]["input_schema"]
    assert req.sampling.max_tokens == 50


def test_non_streaming_tool_round_trip_is_one_segment():
    with scripted_proxy({"anthropic-messages": AnthropicDialect()}, [FIRST, "Two files."]) as (
        server,
        session,
        _,
    ):
        client = client_for(server, session)
        messages = [{"role": "user", "content": "List the files."}]
        first = client.messages.create(
            model="m",
            max_tokens=200,
            system=SYSTEM,
            messages=messages,
            tools=TOOLS,
            extra_body=EXTRA,
        )
        assert first.stop_reason == "tool_use"
        thinking, text, tool = first.content
        assert (thinking.type, thinking.thinking) == ("thinking", "List them.")
        assert (
            text.text == "Let me look." and tool.name == "Bash" and tool.input == {"command": "ls"}
        )
        assert tool.id.startswith("toolu_") and first.usage.input_tokens == len(
            session.calls[0].prompt_ids
        )
        messages += [
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in first.content],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool.id, "content": "a\nb"}],
            },
        ]
        second = client.messages.create(
            model="m", max_tokens=200, system=SYSTEM, messages=messages, tools=TOOLS
        )
        assert second.stop_reason == "end_turn" and second.content[0].text == "Two files."
        assert session.calls[1].extends_previous
        [segment] = session.trajectory().segments
        assert segment.calls == [0, 1]
        [metrics] = session.metrics()
        assert metrics["sampled_share"] == 1.0 and metrics["segments"] == 1


def test_streaming_events_arrive_as_tokens_are_sampled():
    with scripted_proxy({"anthropic-messages": AnthropicDialect()}, [FIRST], token_delay=0.003) as (
        server,
        session,
        inference,
    ):
        client = client_for(server, session)
        kinds, first_text_at = [], None
        with client.messages.stream(
            model="m",
            max_tokens=300,
            system=SYSTEM,
            messages=[{"role": "user", "content": "go"}],
            tools=TOOLS,
        ) as stream:
            for event in stream:
                kinds.append(event.type)
                if event.type == "text" and first_text_at is None:
                    first_text_at = time.monotonic()
            final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "thinking" in kinds and "signature" in kinds and "input_json" in kinds
    assert first_text_at < inference.ended[0] - 0.05
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[2].input == {"command": "ls"} and final.stop_reason == "tool_use"
    assert final.usage.output_tokens == len(session.calls[0].completion_ids)


def test_errors_count_tokens_and_session_root():
    with scripted_proxy({"anthropic-messages": AnthropicDialect()}, [], max_body_bytes=20_000) as (
        server,
        session,
        _,
    ):
        client = client_for(server, session)
        with pytest.raises(anthropic.BadRequestError) as info:
            client.messages.create(model="m", max_tokens=5, messages=[])
        assert info.value.body == {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "messages must be a non-empty list",
            },
        }
        with pytest.raises(anthropic.BadRequestError, match="server tool"):
            client.messages.create(
                model="m",
                max_tokens=5,
                messages=[{"role": "user", "content": "x"}],
                tools=[{"type": "web_search_20250305", "name": "web_search"}],
            )
        with pytest.raises(anthropic.APIStatusError) as info:
            client.messages.create(
                model="m",
                max_tokens=5,
                messages=[{"role": "user", "content": "x" * 30_000}],
            )
        assert info.value.status_code == 413
        assert info.value.body["error"]["type"] == "request_too_large"
        wrong = anthropic.Anthropic(
            base_url=session.base_url(server.url), api_key="no", max_retries=0
        )
        with pytest.raises(anthropic.AuthenticationError):
            wrong.messages.create(
                model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
        counted = client.messages.count_tokens(
            model="m",
            system=SYSTEM,
            messages=[{"role": "user", "content": "hello"}],
            tools=TOOLS,
        )
        assert counted.input_tokens > 20
        url = session.base_url(server.url)
        assert httpx.head(url).status_code == 200 and httpx.get(url + "/").status_code == 200
        raw = httpx.post(
            url + "/v1/messages?beta=true",
            content=b"{oops",
            headers={"x-api-key": session.api_key},
        )
        assert raw.status_code == 400 and raw.json()["type"] == "error"
        assert session.calls == [] and len(session.rejected) == 4
        assert json.loads(raw.text)["error"]["type"] == "invalid_request_error"
