"""Property-based fuzzing of every route of a started proxy, in all three dialects.

Bodies are built from real requests (tests/fixtures/harness-traffic.json: Claude Code, Codex,
mini-swe-agent; the benchmark's traffic in lego_rl/bench/proxy_traffic.py) and mutated: a value
anywhere replaced by one of another type, by text that is not JSON, by nesting thousands of
levels deep, by a huge or odd string; keys dropped or added; the body cut short; raw bytes.

The property, for every request: a 2xx whose body is a well-formed reply (a whole stream), or a
4xx in the dialect's error shape; never a 5xx; and the server healthy afterwards (a normal
request of the same session still gets its reply). Runs are derandomized with a fixed number of
examples (a few minutes on two cores); a failure prints the body that caused it, to be kept as a
plain test beside the others.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from legorl_std.dialects.anthropic import AnthropicDialect
from legorl_std.dialects.openai_chat import OpenAIChatDialect
from legorl_std.dialects.openai_responses import OpenAIResponsesDialect

from lego_rl.bench.proxy_traffic import ChatAgent, ClaudeCode, Codex
from lego_rl.data import Sampling
from lego_rl.proxy.server import ProxyServer
from lego_rl.testing.scripted_inference import AbortableScriptedInference
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

FIXTURE = Path(__file__).parent / "fixtures" / "harness-traffic.json"
DIALECTS = ("openai-chat", "anthropic-messages", "openai-responses")
CALL_PATHS = {
    "openai-chat": "/v1/chat/completions",
    "anthropic-messages": "/v1/messages",
    "openai-responses": "/v1/responses",
}
NORMAL = {
    "openai-chat": {"model": "m", "messages": [{"role": "user", "content": "hello"}]},
    "anthropic-messages": {
        "model": "m",
        "max_tokens": 32,
        "messages": [{"role": "user", "content": "hello"}],
    },
    "openai-responses": {"model": "m", "input": "hello"},
}
REPLIES = [
    "fine",
    "<think>\nlook first\n</think>\n\nLet me look.\n"
    '<tool_call>\n{"name": "Bash", "arguments": {"command": "ls"}}\n</tool_call>',
    '<tool_call>\n{"name": "exec_command", "arguments": "{\\"cmd\\": [1, {}]}"}\n</tool_call>',
    "<tool_call>\nnot json\n</tool_call>",
]
EXAMPLES = 120
"""Examples per fuzzing test and dialect (9 tests x 3 dialects: about 3000 requests)."""
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
SENTINEL = "\x00legorl-splice\x00"
"""A string a mutation puts where raw bytes go: the serialised body's text of it is replaced."""
SPLICED = json.dumps(SENTINEL).encode()


# ---------------------------------------------------------------- the proxy under test


class Proxy:
    """A started server with one session per dialect and a client that keeps its connection."""

    def __init__(self) -> None:
        self.inference = AbortableScriptedInference(tiny_chat_tokenizer(), [])
        self.server = ProxyServer(
            self.inference,
            {
                "openai-chat": OpenAIChatDialect(),
                "anthropic-messages": AnthropicDialect(),
                "openai-responses": OpenAIResponsesDialect(),
            },
            model_name="tiny-policy",
            max_context=4096,
            max_body_bytes=4 * 1024 * 1024,
        )
        self.server.start()
        self.sessions = {
            name: self.server.open_session(f"fuzz-{name}", name, sampling=Sampling(max_tokens=48))
            for name in DIALECTS
        }
        self.http = httpx.Client(timeout=120)

    def url(self, dialect: str, path: str) -> str:
        return self.sessions[dialect].base_url(self.server.url) + path

    def request(
        self, dialect: str, method: str, path: str, body: bytes = b"", key: str | None = None
    ) -> httpx.Response:
        self.inference.replies[:] = REPLIES * 2  # never runs out, whatever came before
        headers = {"x-api-key": self.sessions[dialect].api_key if key is None else key}
        if body:
            headers["content-type"] = "application/json"
        return self.http.request(method, self.url(dialect, path), content=body, headers=headers)

    def close(self) -> None:
        self.http.close()
        self.server.stop()


@pytest.fixture(scope="module")
def proxy() -> Iterator[Proxy]:
    running = Proxy()
    yield running
    running.close()


# ---------------------------------------------------------------- what a good answer is


def openai_error_shape(body: Any) -> bool:
    error = body.get("error") if isinstance(body, dict) else None
    return (
        isinstance(error, dict)
        and isinstance(error.get("message"), str)
        and isinstance(error.get("type"), str)
        and "code" in error
    )


def anthropic_error_shape(body: Any) -> bool:
    error = body.get("error") if isinstance(body, dict) else None
    return (
        isinstance(body, dict)
        and body.get("type") == "error"
        and isinstance(error, dict)
        and isinstance(error.get("type"), str)
        and isinstance(error.get("message"), str)
    )


ERROR_SHAPES = {
    "openai-chat": openai_error_shape,
    "anthropic-messages": anthropic_error_shape,
    "openai-responses": openai_error_shape,
}


def sse_events(text: str) -> list[tuple[str | None, str]]:
    """(event name, data) of each server-sent event of a stream."""
    events = []
    for frame in text.split("\n\n"):
        if not frame.strip():
            continue
        name, data = None, []
        for line in frame.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        events.append((name, "\n".join(data)))
    return events


def check_stream(dialect: str, text: str) -> None:
    """A whole stream of a reply: every event JSON, none an error, ended as the API ends it."""
    events = sse_events(text)
    assert events, "an empty stream"
    payloads = [json.loads(data) for _, data in events if data != "[DONE]"]
    if dialect == "openai-chat":
        assert events[-1][1] == "[DONE]", events[-3:]
        assert all(p.get("object") == "chat.completion.chunk" for p in payloads), payloads[-2:]
        assert any(c["finish_reason"] for p in payloads for c in p["choices"])
    elif dialect == "anthropic-messages":
        kinds = [p["type"] for p in payloads]
        assert "error" not in kinds and kinds[0] == "message_start" and kinds[-1] == "message_stop"
    else:
        kinds = [p["type"] for p in payloads]
        assert kinds[0] == "response.created", kinds
        assert kinds[-1] in ("response.completed", "response.incomplete"), kinds[-3:]
        assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))


def check_reply(dialect: str, body: Any) -> None:
    if dialect == "openai-chat":
        message = body["choices"][0]["message"]
        assert body["object"] == "chat.completion" and message["role"] == "assistant"
    elif dialect == "anthropic-messages":
        assert body["type"] == "message" and isinstance(body["content"], list)
        assert body["stop_reason"] in ("end_turn", "max_tokens", "tool_use", "stop_sequence")
    else:
        assert body["object"] == "response" and isinstance(body["output"], list)
        assert body["status"] in ("completed", "incomplete")


def check(dialect: str, use: str, response: httpx.Response) -> None:
    """The property of one answer (see the module's docstring)."""
    status = response.status_code
    assert status < 500, f"{status}: {response.text[:2000]}"
    if status >= 400:
        assert ERROR_SHAPES[dialect](response.json()), response.text[:2000]
        return
    if use == "head":
        return
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        check_stream(dialect, response.text)
    elif use == "count":
        count = response.json()["input_tokens"]
        assert isinstance(count, int) and count > 0
    elif use == "models":
        assert [m["id"] for m in response.json()["data"]] == ["tiny-policy"]
    elif use == "probe":
        assert isinstance(response.json(), dict)
    else:
        check_reply(dialect, response.json())


def check_healthy(proxy: Proxy, dialect: str) -> None:
    """A normal request of the session still gets its reply."""
    body = json.dumps(NORMAL[dialect]).encode()
    response = proxy.request(dialect, "POST", CALL_PATHS[dialect], body)
    assert response.status_code == 200, response.text[:2000]
    check_reply(dialect, response.json())


def send(proxy: Proxy, dialect: str, use: str, body: bytes) -> None:
    path = CALL_PATHS[dialect] + ("/count_tokens" if use == "count" else "")
    check(dialect, use, proxy.request(dialect, "POST", path, body))
    check_healthy(proxy, dialect)


# ---------------------------------------------------------------- bodies


def real_requests() -> dict[str, list[dict[str, Any]]]:
    """Real request bodies by dialect: the recorded harness traffic and the benchmark's."""
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in DIALECTS}
    for harness in json.loads(FIXTURE.read_text()):
        out[harness["dialect"]].extend(harness["requests"])
    for traffic in (ChatAgent(), ClaudeCode(), Codex()):
        out[traffic.dialect].append(json.loads(traffic.body(traffic.first(0), traffic.shared())))
    return out


REAL = real_requests()

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
WORDS = [
    "role", "content", "type", "text", "tools", "tool_choice", "stream", "messages", "input",
    "system", "instructions", "name", "function", "arguments", "parameters", "input_schema",
    "max_tokens", "max_output_tokens", "stop", "stop_sequences", "tool_calls", "tool_use_id",
    "call_id", "output", "model", "n", "seed", "temperature", "stream_options", "summary",
]  # fmt: skip
ODD_STRINGS = [
    "", " ", "\x00", "\ud800", "\udfff\ud800", "🦜" * 50, "\u202e\u200b", "user\x00",
    "a" * 200_000, "{" * 3000, "</tool_call><|im_end|>", "<|im_start|>system\n",
]  # fmt: skip


def deep(n: int, open_: bytes = b"[", close: bytes = b"]") -> bytes:
    return open_ * n + close * n


RAW_FRAGMENTS = [
    deep(200), deep(2000), deep(50_000), b"[" * 20_000, deep(3000, b'{"a":', b"}"),
    b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-" + b"9" * 400, b"0." + b"0" * 5000 + b"1",
    b'"\\ud800"', b'"\\udfff\\ud800"', b'"\xff\xfe"', b'"\xc3"', b"tru", b"'single'",
    b'"unterminated', b"{", b"]", b"[1,]", b'{"a" 1}', b"\x00",
]  # fmt: skip
"""Text spliced in where a value goes: not all of it is JSON, some is nested past any reader."""

wrong_values = (
    json_values
    | st.sampled_from(ODD_STRINGS)
    | st.sampled_from([[], {}, [[]], [{}], "true", "false", "0", 0, -1, 2**63, True, False, None])
    | st.builds(lambda w: {w: "x"}, st.sampled_from(WORDS))
    | st.builds(lambda w: [w], st.sampled_from(WORDS))
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``value`` (keys and indices), the root's children first."""
    out: list[tuple[Any, ...]] = []
    children: list[tuple[Any, Any]] = []
    if isinstance(value, dict):
        children = list(value.items())
    elif isinstance(value, list):
        children = list(enumerate(value))
    for key, child in children:
        out.append((*prefix, key))
        out.extend(paths(child, (*prefix, key)))
    return out


def replaced(value: Any, path: tuple[Any, ...], new: Any, how: str) -> Any:
    """A copy of ``value`` with the value at ``path`` replaced, dropped or wrapped (``how``)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    if rest:
        copy[head] = replaced(copy[head], rest, new, how)
    elif how == "drop":
        del copy[head]
    elif how == "wrap":
        copy[head] = [copy[head]] if isinstance(new, list) else {"value": copy[head]}
    elif how == "add" and isinstance(copy, dict):
        copy[new if isinstance(new, str) else "extra"] = copy[head]
    else:
        copy[head] = new
    return copy


def serialised(value: Any, splice: bytes | None = None) -> bytes:
    text = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return text.replace(SPLICED, splice, 1) if splice is not None else text


@st.composite
def mutated(draw: st.DrawFn, dialect: str) -> bytes:
    """A real request of ``dialect`` with one to three mutations."""
    body: Any = draw(st.sampled_from(REAL[dialect]))
    splice = None
    for _ in range(draw(st.integers(1, 3))):
        where = paths(body)
        if not where:
            break
        path = draw(st.sampled_from(where[:400]) | st.sampled_from(where))
        how = draw(st.sampled_from(["replace", "replace", "replace", "drop", "wrap", "add", "raw"]))
        if how == "raw" and splice is None:
            splice = draw(st.sampled_from(RAW_FRAGMENTS))
            body = replaced(body, path, SENTINEL, "replace")
        else:
            new = draw(wrong_values if how != "add" else st.sampled_from(WORDS))
            body = replaced(body, path, new, how)
    return serialised(body, splice)


@st.composite
def top_level(draw: st.DrawFn, dialect: str) -> bytes:
    """A real request with a top-level field (or a new one) set to a wrong value."""
    body = dict(draw(st.sampled_from(REAL[dialect])))
    key = draw(st.sampled_from(sorted(body)) | st.sampled_from(WORDS))
    body[key] = draw(wrong_values)
    return serialised(body)


@st.composite
def cut_short(draw: st.DrawFn, dialect: str) -> bytes:
    """A real request's text cut anywhere, or with bytes overwritten."""
    text = serialised(draw(st.sampled_from(REAL[dialect])))
    at = draw(st.integers(0, len(text)))
    if draw(st.booleans()):
        return text[:at]
    junk = draw(st.binary(min_size=1, max_size=8))
    return text[:at] + junk + text[at + len(junk) :]


raw_bytes = st.binary(max_size=256) | st.sampled_from(
    [b"", b"null", b"[]", b"{}", b'"x"', b"1", deep(100_000), deep(5000, b'{"a":', b"}"),
     b"\xef\xbb\xbf{}", b'{"messages": 1', b"\xff" * 64]
)  # fmt: skip
random_objects = st.dictionaries(
    st.sampled_from(WORDS) | st.text(max_size=6), json_values, max_size=6
)


# ---------------------------------------------------------------- the properties


@pytest.mark.parametrize("dialect", DIALECTS)
@FUZZ
@given(data=st.data())
def test_mutated_real_requests_get_a_reply_or_a_400(proxy, dialect, data):
    send(proxy, dialect, "call", data.draw(mutated(dialect)))


@pytest.mark.parametrize("dialect", DIALECTS)
@FUZZ
@given(data=st.data())
def test_a_wrong_type_at_a_top_level_field_gets_a_reply_or_a_400(proxy, dialect, data):
    send(proxy, dialect, "call", data.draw(top_level(dialect)))


@pytest.mark.parametrize("dialect", DIALECTS)
@FUZZ
@given(data=st.data())
def test_bodies_cut_short_or_overwritten_get_a_400(proxy, dialect, data):
    send(proxy, dialect, "call", data.draw(cut_short(dialect)))


@pytest.mark.parametrize("dialect", DIALECTS)
@FUZZ
@given(body=raw_bytes)
def test_bytes_that_are_not_a_request_get_a_400(proxy, dialect, body):
    send(proxy, dialect, "call", body)


@pytest.mark.parametrize("dialect", DIALECTS)
@FUZZ
@given(body=random_objects)
def test_random_objects_get_a_reply_or_a_400(proxy, dialect, body):
    send(proxy, dialect, "call", serialised(body))


@FUZZ
@given(data=st.data())
def test_count_tokens_answers_json_for_any_body(proxy, data):
    body = data.draw(mutated("anthropic-messages") | top_level("anthropic-messages") | raw_bytes)
    send(proxy, "anthropic-messages", "count", body)


@pytest.mark.parametrize("dialect", DIALECTS)
@FUZZ
@given(
    method=st.sampled_from(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
    path=st.sampled_from(
        ["/", "", "/v1/models", "/v1/models/", "/v1/messages/count_tokens", "/v1", "/v1/x",
         "/v1/chat/completions", "/v1/responses", "/v1/messages", "/%00", "/..", "/v1/models?x=1"]
    ),
    body=st.sampled_from([b"", b"{}", b"\xff", deep(3000)]),
    key=st.sampled_from([None, "", "sk-wrong"]),
)  # fmt: skip
def test_every_route_and_method_answers_json_in_its_shape(proxy, dialect, method, path, body, key):
    served = {("GET", "/v1/models"): "models", ("POST", CALL_PATHS[dialect]): "call"}
    if dialect == "anthropic-messages":
        served[("POST", "/v1/messages/count_tokens")] = "count"
    route = "/" + path.split("?")[0].strip("/")  # the proxy's normalised path
    use = served.get((method, route), "other")
    if route == "/" and method in ("GET", "HEAD"):
        use = "probe" if method == "GET" else "head"  # the base URL: any key, the same answer
    response = proxy.request(dialect, method, path, body, key)
    status = response.status_code
    assert status < 500, f"{status}: {response.text[:2000]}"
    if use in ("probe", "head") or (use != "other" and key is None):
        check(dialect, use, response)
    elif method != "HEAD":  # refused: a wrong key, an unknown path, a method not served
        assert status in (401, 404, 405), response.text[:2000]
        refusal = response.json()
        assert openai_error_shape(refusal) or anthropic_error_shape(refusal), refusal
    check_healthy(proxy, dialect)


def test_the_root_and_its_probe_answer(proxy):
    for method in ("GET", "HEAD"):
        response = proxy.http.request(method, proxy.server.url + "/")
        assert response.status_code == 200
        if method == "GET":
            assert response.json() == {"status": "ok"}
    for dialect in DIALECTS:
        check_healthy(proxy, dialect)
