"""Real streaming: decoding token by token, and the openai SDK reading chat chunks as they come."""

import json
import time

import openai
import pytest
from legorl_std.dialects.openai_chat import OpenAIChatDialect

from lego_rl.proxy.streaming import IncrementalDecoder
from lego_rl.proxy.toolcalls import CompletionParser, Delta, ToolCall, parse_completion
from lego_rl.testing.scripted_inference import scripted_proxy
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
            },
        },
    }
]
REPLY = (
    "<think>\nLook first.\n</think>\n\nVoilà: café ☕ ok.\n"
    '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>'
)


def test_incremental_decoding_holds_split_multibyte_characters():
    tok = tiny_chat_tokenizer()
    ids = tok.encode("é☕x")  # byte-level: 2 + 3 + 1 tokens
    decoder = IncrementalDecoder(tok, skip=[tok.eos_token_id])
    pieces = [decoder.push(i) for i in [*ids, tok.eos_token_id]]
    assert pieces == ["", "é", "", "", "☕", "x", ""]


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
def test_parser_events_do_not_depend_on_how_text_is_split(size):
    text = REPLY + "\n<tool_call>\nnot json\n</tool_call> tail"
    parser = CompletionParser(tools=TOOLS)
    events = []
    for start in range(0, len(text), size):
        events += parser.feed(text[start : start + size])
    events += parser.finish()
    texts = "".join(e.text for e in events if isinstance(e, Delta) and e.kind == "text")
    # Markup never leaks; the malformed call stays as the policy wrote it.
    assert texts == "Voilà: café ☕ ok.\n<tool_call>\nnot json\n</tool_call> tail"
    whole = parse_completion(text, tools=TOOLS)
    assert texts == whole.content and parser.malformed == whole.malformed == 1
    assert [e.call["function"]["arguments"] for e in events if isinstance(e, ToolCall)] == [
        '{"command": "ls -la"}'
    ]


def test_qwen3_coder_tool_calls_use_the_parameter_schema():
    tools = [
        {
            "type": "function",
            "function": {
                "name": "edit",
                "parameters": {
                    "properties": {
                        "path": {"type": "string"},
                        "line": {"type": "integer"},
                    }
                },
            },
        }
    ]
    text = (
        "<tool_call>\n<function=edit>\n<parameter=path>\n007.py\n</parameter>\n"
        "<parameter=line>\n12\n</parameter>\n</function>\n</tool_call>"
    )
    [call] = parse_completion(text, tools=tools).tool_calls
    assert call["function"]["name"] == "edit"
    assert json.loads(call["function"]["arguments"]) == {"path": "007.py", "line": 12}


def test_openai_sdk_streams_text_and_tool_calls_before_generation_ends():
    with scripted_proxy({"openai-chat": OpenAIChatDialect()}, [REPLY], token_delay=0.004) as (
        server,
        session,
        inference,
    ):
        client = openai.OpenAI(
            base_url=session.base_url(server.url) + "/v1",
            api_key=session.api_key,
            max_retries=0,
        )
        stream = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "go"}],
            tools=TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
        arrivals, content, reasoning, calls, finish, usage = [], "", "", {}, None, None
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    arrivals.append(time.monotonic())
                    content += delta.content
                reasoning += getattr(delta, "reasoning_content", None) or ""
                for call in delta.tool_calls or []:
                    entry = calls.setdefault(call.index, {"id": "", "name": "", "args": ""})
                    entry["id"] += call.id or ""
                    entry["name"] += (call.function and call.function.name) or ""
                    entry["args"] += (call.function and call.function.arguments) or ""
                finish = choice.finish_reason or finish
    assert content == "Voilà: café ☕ ok." and reasoning == "Look first."
    assert len(arrivals) > 5
    # The first words reached the client long before the backend finished generating.
    assert arrivals[0] < inference.ended[0] - 0.1
    [call] = calls.values()
    assert call["name"] == "bash" and json.loads(call["args"]) == {"command": "ls -la"}
    assert call["id"].startswith("call_") and finish == "tool_calls"
    assert usage.completion_tokens == len(session.calls[0].completion_ids)
    assert usage.prompt_tokens == len(session.calls[0].prompt_ids)


def test_backend_failure_mid_stream_reaches_the_client_as_an_error():
    with scripted_proxy({"openai-chat": OpenAIChatDialect()}, [RuntimeError("device lost")]) as (
        server,
        session,
        _,
    ):
        client = openai.OpenAI(
            base_url=session.base_url(server.url) + "/v1",
            api_key=session.api_key,
            max_retries=0,
        )
        with pytest.raises(openai.APIError, match="device lost"):
            for _ in client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "go"}], stream=True
            ):
                pass
        assert session.calls[0].error == "RuntimeError: device lost"
