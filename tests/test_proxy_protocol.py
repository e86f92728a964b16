"""Protocol details of the three dialects, through the official SDKs (and raw HTTP where an SDK
cannot send the body): a string ``stream``, a Responses reply cut at its token limit, hosted
tools refused or dropped (the dialects' ``hosted_tools`` option)."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest
from legorl_std.dialects.anthropic import AnthropicDialect, AnthropicOptions
from legorl_std.dialects.openai_chat import OpenAIChatDialect, OpenAIChatOptions
from legorl_std.dialects.openai_responses import OpenAIResponsesDialect, OpenAIResponsesOptions
from pydantic import ValidationError

from lego_rl.data import Sampling
from lego_rl.registry import default_registry
from lego_rl.testing.scripted_inference import scripted_proxy

USER = [{"role": "user", "content": "hi"}]
FUNCTION = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a command",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}
HOSTED = [
    {"type": "web_search"},
    {"type": "namespace", "name": "agents", "tools": [{"type": "function", "name": "spawn"}]},
]


def openai_client(server, session) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=session.base_url(server.url) + "/v1", api_key=session.api_key, max_retries=0
    )


def anthropic_client(server, session) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=session.base_url(server.url), api_key=session.api_key, max_retries=0
    )


def prompt_of(inference, call: int = 0) -> str:
    return inference.tokenizer.decode(inference.prompts[call])


# ---------------------------------------------------------------- stream must be a boolean


@pytest.mark.parametrize("value", ["false", "true", 0, 1, [], {}])
def test_chat_stream_that_is_not_a_boolean_is_a_400_not_a_stream(value):
    with scripted_proxy({"openai-chat": OpenAIChatDialect()}, ["never sent"]) as (
        server,
        session,
        inference,
    ):
        with pytest.raises(openai.BadRequestError) as info:
            openai_client(server, session).chat.completions.create(
                model="m", messages=USER, extra_body={"stream": value}
            )
        assert info.value.body["message"] == "stream must be a boolean"
        assert info.value.response.headers["content-type"] == "application/json"
        assert inference.prompts == [] and session.calls == []


@pytest.mark.parametrize(
    ("dialect", "path", "body"),
    [
        (OpenAIChatDialect(), "/v1/chat/completions", {"messages": USER}),
        (AnthropicDialect(), "/v1/messages", {"max_tokens": 8, "messages": USER}),
        (OpenAIResponsesDialect(), "/v1/responses", {"input": "hi"}),
    ],
    ids=["openai-chat", "anthropic-messages", "openai-responses"],
)
def test_stream_null_is_not_streamed_and_a_string_is_refused_in_every_dialect(dialect, path, body):
    with scripted_proxy({dialect.name: dialect}, ["fine"]) as (server, session, _):
        url, headers = session.base_url(server.url) + path, {"x-api-key": session.api_key}
        plain = httpx.post(url, json={**body, "stream": None}, headers=headers)
        assert plain.status_code == 200
        assert plain.headers["content-type"] == "application/json"
        refused = httpx.post(url, json={**body, "stream": "false"}, headers=headers)
        assert refused.status_code == 400 and "stream must be a boolean" in refused.text
        assert len(session.calls) == 1


# ---------------------------------------------------------------- a reply cut at its limit


def test_a_responses_stream_cut_at_its_token_limit_ends_with_response_incomplete():
    dialects = {"openai-responses": OpenAIResponsesDialect()}
    with scripted_proxy(dialects, ["a reply longer than five tokens"] * 2) as (
        server,
        session,
        _,
    ):
        client = openai_client(server, session)
        events = list(
            client.responses.create(model="m", input="hi", max_output_tokens=5, stream=True)
        )
        last = events[-1]
        assert last.type == "response.incomplete", [e.type for e in events[-3:]]
        assert "response.completed" not in [e.type for e in events]
        assert last.response.status == "incomplete"
        assert last.response.incomplete_details.reason == "max_output_tokens"
        assert last.response.output[0].content[0].text == "a rep"
        assert [e.sequence_number for e in events] == list(range(len(events)))
        plain = client.responses.create(model="m", input="hi", max_output_tokens=5)
        assert plain.status == "incomplete" and plain.output_text == "a rep"
        assert [c.finish_reason for c in session.calls] == ["length", "length"]


def test_a_responses_stream_that_ends_on_its_own_ends_with_response_completed():
    with scripted_proxy({"openai-responses": OpenAIResponsesDialect()}, ["done"]) as (
        server,
        session,
        _,
    ):
        stream = openai_client(server, session).responses.stream(model="m", input="hi")
        with stream as events:
            kinds = [e.type for e in events]
            final = events.get_final_response()
        assert kinds[-1] == "response.completed" and "response.incomplete" not in kinds
        assert final.status == "completed" and final.output_text == "done"


# ---------------------------------------------------------------- hosted tools


def test_hosted_tools_are_refused_by_default_naming_the_tool_and_the_option():
    with scripted_proxy({"openai-responses": OpenAIResponsesDialect()}, ["never"]) as (
        server,
        session,
        inference,
    ):
        with pytest.raises(openai.BadRequestError) as info:
            openai_client(server, session).responses.create(
                model="m", input="hi", tools=[FUNCTION, *HOSTED]
            )
        message = info.value.body["message"]
        assert "tools[1] of type 'web_search'" in message and "hosted_tools: drop" in message
        assert inference.prompts == []


def test_responses_drop_leaves_hosted_tools_out_of_the_prompt_and_records_them():
    dialect = OpenAIResponsesDialect(OpenAIResponsesOptions(hosted_tools="drop"))
    with scripted_proxy({"openai-responses": dialect}, ["fine"] * 3) as (
        server,
        session,
        inference,
    ):
        client = openai_client(server, session)
        reply = client.responses.create(model="m", input="hi", tools=[*HOSTED, FUNCTION])
        assert reply.status == "completed" and reply.output_text == "fine"
        prompt = prompt_of(inference)
        assert "exec_command" in prompt
        assert "web_search" not in prompt and "agents" not in prompt and "spawn" not in prompt
        assert session.calls[0].dropped_tools == ["web_search", "namespace:agents"]
        streamed = client.responses.create(
            model="m", input="hi", tools=[{"type": "web_search"}], stream=True
        )
        assert [e.type for e in streamed][-1] == "response.completed"
        assert session.calls[1].dropped_tools == ["web_search"]
        assert "# Tools" not in prompt_of(inference, 1)  # no tool left: none rendered
        client.responses.create(model="m", input="hi", tools=[FUNCTION])
        assert session.calls[2].dropped_tools == []


def test_anthropic_drop_leaves_server_tools_out_of_calls_and_counts():
    dialect = AnthropicDialect(AnthropicOptions(hosted_tools="drop"))
    with scripted_proxy({"anthropic-messages": dialect}, ["fine"]) as (server, session, inference):
        client = anthropic_client(server, session)
        tools = [
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
            {"name": "Bash", "description": "Run", "input_schema": {"type": "object"}},
        ]
        reply = client.messages.create(model="m", max_tokens=16, messages=USER, tools=tools)
        assert reply.content[0].text == "fine"
        assert session.calls[0].dropped_tools == ["web_search_20250305:web_search"]
        assert "Bash" in prompt_of(inference) and "web_search" not in prompt_of(inference)
        counted = client.messages.count_tokens(model="m", messages=USER, tools=tools)
        assert counted.input_tokens == len(inference.prompts[0])
        refusing = AnthropicDialect()
        with scripted_proxy({"anthropic-messages": refusing}, []) as (server2, session2, _):
            with pytest.raises(anthropic.BadRequestError, match="server tool"):
                anthropic_client(server2, session2).messages.count_tokens(
                    model="m", messages=USER, tools=tools
                )


def test_chat_drop_leaves_non_function_tools_out():
    dialect = OpenAIChatDialect(OpenAIChatOptions(hosted_tools="drop"))
    with scripted_proxy({"openai-chat": dialect}, ["fine"]) as (server, session, inference):
        tools = [
            {"type": "custom", "name": "apply_patch", "description": "Patch files"},
            {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},
        ]
        reply = openai_client(server, session).chat.completions.create(
            model="m", messages=USER, tools=tools
        )
        assert reply.choices[0].message.content == "fine"
        assert session.calls[0].dropped_tools == ["custom:apply_patch"]
        assert "apply_patch" not in prompt_of(inference) and "bash" in prompt_of(inference)


def test_a_malformed_function_tool_is_refused_even_when_hosted_tools_are_dropped():
    dialect = OpenAIResponsesDialect(OpenAIResponsesOptions(hosted_tools="drop"))
    with scripted_proxy({"openai-responses": dialect}, []) as (server, session, _):
        url = session.base_url(server.url) + "/v1/responses"
        for tools in ([{"type": "function"}], [{"type": 3}], ["web_search"]):
            answer = httpx.post(
                url, json={"input": "hi", "tools": tools}, headers={"x-api-key": session.api_key}
            )
            assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request"


@pytest.mark.parametrize("name", ["openai-chat", "anthropic-messages", "openai-responses"])
def test_hosted_tools_is_a_documented_option_of_every_dialect(name):
    registry = default_registry()
    model = registry.get("dialect", name).options
    field = model.model_fields["hosted_tools"]
    assert field.default == "refuse" and "drop" in field.description
    assert "CallRecord.dropped_tools" in field.description
    dialect = registry.build("dialect", name, {"hosted_tools": "drop"})
    assert dialect.options.hosted_tools == "drop"
    with pytest.raises(ValidationError):
        model(hosted_tools="ignore")
    with pytest.raises(ValidationError):
        model(hosted_tool="drop")  # extra="forbid": a typo is an error


def test_a_memoised_tool_list_records_its_drop_on_every_call():
    """The drop happens on the dialect's memoised parse: a second body with the same tools
    records the same drop (the memo keeps the labels with the parse)."""
    dialect = OpenAIResponsesDialect(OpenAIResponsesOptions(hosted_tools="drop"))
    with scripted_proxy(
        {"openai-responses": dialect}, ["a", "b"], sampling=Sampling(max_tokens=8)
    ) as (server, session, _):
        client = openai_client(server, session)
        for _ in range(2):
            client.responses.create(model="m", input=USER, tools=HOSTED)
        assert [c.dropped_tools for c in session.calls] == [["web_search", "namespace:agents"]] * 2
