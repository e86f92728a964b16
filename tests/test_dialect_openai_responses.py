"""The openai-responses dialect with the official openai SDK (client.responses) as the client."""

import json
import time
from pathlib import Path

import openai
import pytest
from legorl_std.dialects.openai_responses import OpenAIResponsesDialect

from lego_rl.kinds import Dialect
from lego_rl.proxy.errors import BadRequest
from lego_rl.proxy.pipeline import read_request
from lego_rl.testing.scripted_inference import scripted_proxy

TOOLS = [
    {
        "type": "function",
        "name": "shell",
        "description": "Run a command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        "strict": False,
    }
]
FIRST = (
    "<think>\nCheck.\n</think>\n\nLooking.\n"
    '<tool_call>\n{"name": "shell", "arguments": {"command": "ls"}}\n</tool_call>'
)


def client_for(server, session):
    return openai.OpenAI(
        base_url=session.base_url(server.url) + "/v1",
        api_key=session.api_key,
        max_retries=0,
    )


def test_parses_codex_style_input_items():
    dialect = OpenAIResponsesDialect()
    assert isinstance(dialect, Dialect)
    req = dialect.parse(
        {
            "model": "m",
            "instructions": "You are Codex.",
            "input": [
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "sandbox"}],
                },
                {"role": "user", "content": "fix it"},
                {
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": "plan"}],
                },
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "ok"}],
                },
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "shell",
                    "arguments": '{"a": 1}',
                },
                {"type": "function_call_output", "call_id": "c1", "output": "done"},
            ],
            "tools": TOOLS,
            "store": False,
            "max_output_tokens": 64,
        }
    )
    assert [m.role for m in req.messages] == [
        "system",
        "system",
        "user",
        "assistant",
        "tool",
    ]
    turn = req.messages[3]
    assert (turn.reasoning, turn.content, turn.tool_calls[0]["id"]) == (
        "plan",
        "ok",
        "c1",
    )
    assert req.messages[4].tool_call_id == "c1" and req.sampling.max_tokens == 64
    assert req.tools[0]["function"]["name"] == "shell"


def test_non_streaming_round_trip():
    with scripted_proxy({"openai-responses": OpenAIResponsesDialect()}, [FIRST, "All done."]) as (
        server,
        session,
        _,
    ):
        client = client_for(server, session)
        items = [{"role": "user", "content": "List files."}]
        first = client.responses.create(
            model="m", instructions="Be brief.", input=items, tools=TOOLS
        )
        kinds = [o.type for o in first.output]
        assert kinds == ["reasoning", "message", "function_call"] and first.status == "completed"
        call = first.output[2]
        assert call.name == "shell" and json.loads(call.arguments) == {"command": "ls"}
        assert first.output_text == "Looking."
        items += [o.model_dump(exclude_none=True) for o in first.output[1:]]
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": "a.txt"})
        second = client.responses.create(
            model="m", instructions="Be brief.", input=items, tools=TOOLS
        )
        assert second.output_text == "All done."
        assert second.usage.input_tokens == len(session.calls[1].prompt_ids)


def test_streaming_events_with_sequence_numbers():
    with scripted_proxy(
        {"openai-responses": OpenAIResponsesDialect()}, [FIRST], token_delay=0.003
    ) as (server, session, inference):
        client = client_for(server, session)
        events, first_delta_at = [], None
        for event in client.responses.create(model="m", input="go", tools=TOOLS, stream=True):
            events.append(event)
            if event.type == "response.output_text.delta" and first_delta_at is None:
                first_delta_at = time.monotonic()
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    for needed in (
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ):
        assert needed in kinds
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Looking." and first_delta_at < inference.ended[0] - 0.05
    done = events[-1].response
    assert [o.type for o in done.output] == ["reasoning", "message", "function_call"]
    assert json.loads(done.output[2].arguments) == {"command": "ls"}


def test_stateless_and_unsupported_tools_are_clear_400s():
    with scripted_proxy({"openai-responses": OpenAIResponsesDialect()}, []) as (
        server,
        session,
        _,
    ):
        client = client_for(server, session)
        with pytest.raises(openai.BadRequestError, match="previous_response_id"):
            client.responses.create(model="m", input="x", previous_response_id="resp_1")
        with pytest.raises(openai.BadRequestError, match="web_search"):
            client.responses.create(model="m", input="x", tools=[{"type": "web_search"}])
        assert session.calls == [] and len(session.rejected) == 2


def codex_body(turns: int, **fields) -> bytes:
    """A Codex-shaped request after ``turns`` tool round trips (reasoning, text and a call per
    turn, the call's output after it)."""
    items = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
    ]
    for n in range(turns):
        items += [
            {"type": "reasoning", "id": f"rs{n}", "summary": [{"type": "summary_text", "text": f"plan {n}"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"step {n}"}]},
            {"type": "function_call", "call_id": f"c{n}", "name": "shell",
             "arguments": '{"n": 123456789012345678901234567890}'},
            {"type": "function_call_output", "call_id": f"c{n}", "output": f"out {n}"},
        ]
    return json.dumps({"model": "m", "input": items, "tools": TOOLS, "store": False} | fields).encode()


def same_request(fast, full) -> None:
    assert fast is not None
    assert (fast.messages, fast.tools, fast.sampling, fast.model, fast.stream) == (
        full.messages, full.tools, full.sampling, full.model, full.stream
    )
    assert fast.raw == {k: v for k, v in full.raw.items() if k != "input"}


@pytest.mark.parametrize(
    "fields",
    [{}, {"stream": True, "instructions": "Be brief.", "prompt_cache_key": "k"},
     {"max_output_tokens": 9, "instructions": "", "tools": None, "temperature": 0.5}],
    ids=["plain", "stream", "sampling"],
)
def test_a_body_read_as_texts_gives_the_request_a_full_read_gives(fields):
    dialect = OpenAIResponsesDialect()
    turns = []
    for n in range(4):
        raw = codex_body(n, **fields)
        fast = dialect.parse_body(raw, "s")
        same_request(fast, OpenAIResponsesDialect().parse(json.loads(raw)))
        turns.append([m for m in fast.messages if m.role == "assistant"])
    assert "123456789012345678901234567890" in turns[-1][0].tool_calls[0]["function"]["arguments"]
    assert dialect.memo.reused == 2 + 6 + 10  # each call re-reads only its new items
    assert all(a is b for a, b in zip(turns[2], turns[3]))  # earlier turns joined once


def test_recorded_codex_requests_read_as_texts_as_in_full():
    traffic = json.loads((Path(__file__).parent / "fixtures" / "harness-traffic.json").read_text())
    (codex,) = [h for h in traffic if h["harness"] == "codex"]
    dialect = OpenAIResponsesDialect()
    for body in codex["requests"]:
        raw = json.dumps(body).encode()
        same_request(dialect.parse_body(raw, "s"), dialect.parse(json.loads(raw)))
    assert dialect.memo.reused > 0


@pytest.mark.parametrize(
    "fields",
    [{"previous_response_id": "resp_1"}, {"stream": "yes"}, {"model": 1}, {"max_output_tokens": 0}],
    ids=["stateful", "stream", "model", "budget"],
)
def test_a_wrong_setting_is_reported_by_the_full_read_in_its_order(fields):
    raw = codex_body(1, **fields)
    assert OpenAIResponsesDialect().parse_body(raw, "s") is None
    same_bad_request(raw)


@pytest.mark.parametrize(
    "fields",
    [{"instructions": 5}, {"tools": [{"type": "web_search"}]}, {"input": [{"type": "audio"}]},
     {"input": [], "stream": 1}],
    ids=["instructions", "tools", "item", "empty"],
)
def test_a_wrong_part_is_the_same_bad_request(fields):
    same_bad_request(codex_body(1, **fields))


def same_bad_request(raw: bytes) -> None:
    with pytest.raises(BadRequest) as fast:
        read_request(OpenAIResponsesDialect(), raw, "s")
    with pytest.raises(BadRequest) as full:
        OpenAIResponsesDialect().parse(json.loads(raw))
    assert (fast.value.message, fast.value.param) == (full.value.message, full.value.param)
