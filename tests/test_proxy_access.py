"""Who may reach a session, and how the proxy refuses: a wrong key and an unknown session get
one answer, in the shape of the API whose path was called; every refusal is JSON."""

import anthropic
import httpx
import openai
import pytest
from legorl_std.dialects.anthropic import AnthropicDialect
from legorl_std.dialects.openai_chat import OpenAIChatDialect
from legorl_std.dialects.openai_responses import OpenAIResponsesDialect

from lego_rl.data import Sampling
from lego_rl.proxy.server import NO_SESSION
from lego_rl.testing.scripted_inference import scripted_proxy

ANTHROPIC_PATHS = ["/v1/messages", "/v1/messages/count_tokens"]
OPENAI_PATHS = ["/v1/chat/completions", "/v1/responses", "/v1/models", "/elsewhere", "/"]
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def proxy():
    """Sessions "claude" (anthropic-messages) and "chat" (openai-chat), and one closed."""
    dialects = {
        "anthropic-messages": AnthropicDialect(),
        "openai-chat": OpenAIChatDialect(),
        "openai-responses": OpenAIResponsesDialect(),
    }
    with scripted_proxy(dialects, ["fine"] * 4) as (server, first, _):
        server.close_session(first.id)
        claude = server.open_session("claude", "anthropic-messages", sampling=Sampling())
        chat = server.open_session("chat", "openai-chat", sampling=Sampling())
        yield server, claude, chat


def answer(response: httpx.Response) -> tuple[int, bytes, dict[str, str]]:
    headers = {k: v for k, v in response.headers.items() if k != "date"}
    return response.status_code, response.content, headers


@pytest.mark.parametrize(
    ("method", "path"),
    [
        (method, path)
        for method in ("POST", "GET", "PUT")
        for path in ANTHROPIC_PATHS + OPENAI_PATHS
        if (method, path) != ("GET", "/")  # the base URL probe: test_the_base_url_probe
    ],
)
def test_a_wrong_key_and_an_unknown_session_get_one_answer(proxy, method, path):
    server, claude, _ = proxy

    def call(sid: str, headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
        url = f"{server.url}/s/{sid}{path}"
        return answer(httpx.request(method, url, headers=headers, content=b'{"x": 1}'))

    wrong = call("claude", {"x-api-key": "sk-wrong"})
    assert call("claude", {}) == wrong
    assert call("claude", {"authorization": "Bearer sk-wrong"}) == wrong
    assert call("trial-1", {"x-api-key": "sk-wrong"}) == wrong  # closed
    assert call("never-opened", {"x-api-key": claude.api_key}) == wrong  # another's key
    status, body, _ = wrong
    if path in ANTHROPIC_PATHS:
        error = {"type": "authentication_error", "message": NO_SESSION}
        expected = {"type": "error", "error": error}
    else:
        expected = {
            "error": {
                "message": NO_SESSION,
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        }
    assert status == 401 and httpx.Response(200, content=body).json() == expected
    assert claude.rejected == []


def test_the_sdks_read_the_refusal_as_their_own_api_error(proxy):
    server, claude, chat = proxy
    found = []
    for sid, key in [("claude", "sk-wrong"), ("nope", claude.api_key)]:
        client = anthropic.Anthropic(base_url=f"{server.url}/s/{sid}", api_key=key, max_retries=0)
        with pytest.raises(anthropic.AuthenticationError) as info:
            client.messages.create(model="m", max_tokens=5, messages=USER)
        found.append(info.value.body)
    for sid, key in [("chat", "sk-wrong"), ("nope", chat.api_key)]:
        client = openai.OpenAI(base_url=f"{server.url}/s/{sid}/v1", api_key=key, max_retries=0)
        with pytest.raises(openai.AuthenticationError) as info:
            client.chat.completions.create(model="m", messages=USER)
        found.append(info.value.body)
    assert found[0] == found[1] and found[0]["error"]["type"] == "authentication_error"
    assert found[2] == found[3] and found[2]["code"] == "invalid_api_key"


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_the_base_url_probe(proxy, method):
    server, _, _ = proxy
    probes = [
        answer(httpx.request(method, f"{server.url}/s/{sid}{tail}"))
        for sid in ("claude", "trial-1", "never-opened")
        for tail in ("", "/")
    ]
    assert probes == [probes[0]] * len(probes) and probes[0][0] == 200


def test_a_wrong_method_on_a_route_is_a_405_in_its_dialect_shape(proxy):
    server, claude, chat = proxy
    claude_client = anthropic.Anthropic(
        base_url=claude.base_url(server.url), api_key=claude.api_key, max_retries=0
    )
    with pytest.raises(anthropic.APIStatusError) as info:
        claude_client.get("/v1/messages", cast_to=httpx.Response)
    assert info.value.status_code == 405
    assert info.value.response.headers["allow"] == "POST"
    body = info.value.body
    assert body["type"] == "error" and "GET /v1/messages is not served" in body["error"]["message"]
    chat_client = openai.OpenAI(
        base_url=chat.base_url(server.url) + "/v1", api_key=chat.api_key, max_retries=0
    )
    with pytest.raises(openai.APIStatusError) as info:
        chat_client.get("/chat/completions", cast_to=httpx.Response)
    assert info.value.status_code == 405 and info.value.body["code"] == "method_not_allowed"
    models = httpx.post(
        chat.base_url(server.url) + "/v1/models", headers={"x-api-key": chat.api_key}
    )
    assert models.status_code == 405 and models.headers["allow"] == "GET"
    assert models.json()["error"]["code"] == "method_not_allowed"
    assert [m.id for m in chat_client.models.list()] == ["tiny-policy"]
    assert claude.calls == chat.calls == []


@pytest.mark.parametrize(
    ("method", "path", "status", "anthropic_shape"),
    [
        ("POST", "/", 405, False),
        ("GET", "/nowhere", 404, False),
        ("POST", "/v1/messages", 404, True),  # a base URL without its /s/<id>
        ("POST", "/s/", 404, False),
        ("TRACE", "/s/claude/v1/messages", 405, True),
    ],
)
def test_paths_outside_a_session_answer_json_in_their_api_shape(
    proxy, method, path, status, anthropic_shape
):
    server, _, _ = proxy
    response = httpx.request(method, server.url + path)
    assert response.status_code == status
    body = response.json()
    if anthropic_shape:
        assert body["type"] == "error" and "/s/<session id>/" in body["error"]["message"]
    else:
        assert body["error"]["code"] == ("method_not_allowed" if status == 405 else "not_found")
