"""What one client may take of the proxy: a body is refused (413) the moment it passes the cap,
and requests past the in-flight caps (per session, overall) are refused (429) in the API's
shape, while slow bodies hold places, never worker threads.

Raw clients (h11 on a loopback socket) send a request's head and part of its body and wait:
the proxy's answers must come without the rest. The socket timeout only guards against a hang.
"""

import json
import re
import socket
import threading
import time
from urllib.parse import urlsplit

import anthropic
import h11
import httpx
import openai
import pytest
from legorl_std.dialects.anthropic import AnthropicDialect
from legorl_std.dialects.openai_chat import OpenAIChatDialect

from lego_rl.data import Sampling
from lego_rl.proxy.server import ProxyServer
from lego_rl.testing.scripted_inference import ScriptedInference, scripted_proxy
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

DIALECTS = {"openai-chat": OpenAIChatDialect(), "anthropic-messages": AnthropicDialect()}
CHAT_BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
BODIES = {
    "/v1/chat/completions": CHAT_BODY,
    "/v1/messages": json.dumps(
        {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
    ).encode(),
}
HANG_GUARD_S = 60


def wait_until(condition, what):
    """Poll until ``condition()`` holds; the deadline only turns a hang into a failure."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        assert time.monotonic() < deadline, f"never came true: {what}"
        time.sleep(0.002)


class RawClient:
    """One request on its own connection, sent piece by piece."""

    def __init__(self, server, session, path, *, length=None):
        host, port = urlsplit(server.url).hostname, urlsplit(server.url).port
        self.sock = socket.create_connection((host, port), timeout=HANG_GUARD_S)
        self.h11 = h11.Connection(h11.CLIENT)
        framing = (
            ("transfer-encoding", "chunked") if length is None else ("content-length", str(length))
        )
        headers = [("host", f"{host}:{port}"), ("x-api-key", session.api_key), framing]
        self._send(h11.Request(method="POST", target=f"/s/{session.id}{path}", headers=headers))

    def _send(self, event):
        self.sock.sendall(self.h11.send(event))

    def send(self, data: bytes) -> None:
        self._send(h11.Data(data=data))

    def end(self) -> None:
        self._send(h11.EndOfMessage())

    def response(self) -> tuple[int, dict[str, str], dict]:
        """The answer (status, headers, JSON body), read whether or not the body was all sent."""
        head, body = None, b""
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                self.h11.receive_data(self.sock.recv(65536))
            elif isinstance(event, h11.Response):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                headers = {k.decode(): v.decode() for k, v in head.headers}
                return head.status_code, headers, json.loads(body)

    def close(self) -> None:
        self.sock.close()


def chat_client(server, session):
    return openai.OpenAI(
        base_url=session.base_url(server.url) + "/v1",
        api_key=session.api_key,
        max_retries=0,
        timeout=HANG_GUARD_S,
    )


# ------------------------------------------------------------------ body size


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_a_chunked_body_is_refused_once_past_the_cap_before_it_ends(path):
    with scripted_proxy(DIALECTS, ["never"], max_body_bytes=1000) as (server, chat, inference):
        claude = server.open_session("claude", "anthropic-messages", sampling=Sampling())
        session = claude if path == "/v1/messages" else chat
        client = RawClient(server, session, path)
        client.send(b" " * 600)
        client.send(b" " * 600)  # past the cap; the body never ends
        status, _, body = client.response()
        client.close()
        assert status == 413
        if path == "/v1/messages":
            assert body["type"] == "error" and body["error"]["type"] == "request_too_large"
        else:
            assert body["error"]["code"] == "request_too_large"
        message = body["error"]["message"]
        arrived = re.search(r"of (\d+) bytes or more is over the proxy's limit of 1000 ", message)
        assert arrived and 1000 < int(arrived[1]) <= 1200 and "max_body_bytes" in message
        assert session.rejected == [f"413 request_too_large: {message}"]
        assert inference.prompts == []
        wait_until(lambda: server.in_flight.total == 0, "the refused request's place freed")


def test_a_declared_length_over_the_cap_is_refused_before_any_body():
    with scripted_proxy(DIALECTS, ["never"], max_body_bytes=1000) as (server, session, _):
        client = RawClient(server, session, "/v1/chat/completions", length=10**9)
        status, _, body = client.response()
        client.close()
        assert status == 413 and "1000000000 bytes (its Content-Length)" in body["error"]["message"]


def test_the_cap_is_the_last_byte_allowed():
    cap = len(CHAT_BODY) + 10
    with scripted_proxy(DIALECTS, ["at the cap"], max_body_bytes=cap) as (server, session, _):
        url = session.base_url(server.url) + "/v1/chat/completions"
        headers = {"x-api-key": session.api_key}

        def chunked(padding: int):
            yield CHAT_BODY
            yield b" " * padding

        fits = httpx.post(url, content=chunked(10), headers=headers)
        assert fits.status_code == 200, fits.text
        assert fits.json()["choices"][0]["message"]["content"] == "at the cap"
        over = httpx.post(url, content=chunked(11), headers=headers)
        assert over.status_code == 413 and over.json()["error"]["code"] == "request_too_large"
        with pytest.raises(openai.APIStatusError) as info:
            chat_client(server, session).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x" * cap}]
            )
        assert info.value.status_code == 413 and info.value.body["code"] == "request_too_large"


# ------------------------------------------------------------------ requests in flight


def slow_clients(server, session, n, path="/v1/chat/completions"):
    """``n`` requests whose bodies stop short of their end; returns once all are admitted."""
    before = server.in_flight.by_session.get(session.id, 0)
    body = BODIES[path]
    clients = [RawClient(server, session, path, length=len(body)) for _ in range(n)]
    for client in clients:
        client.send(body[:-1])
        client.rest = body[-1:]
    wait_until(
        lambda: server.in_flight.by_session.get(session.id, 0) == before + n,
        f"{n} slow requests of {session.id} in flight",
    )
    return clients


def finish(clients):
    """Send the rest of each slow body; the statuses of the answers."""
    statuses = []
    for client in clients:
        client.send(client.rest)
        client.end()
        statuses.append(client.response()[0])
        client.close()
    return statuses


def test_slow_bodies_hold_places_not_worker_threads():
    with scripted_proxy(DIALECTS, ["reply"] * 7, max_workers=2, max_in_flight=16) as (
        server,
        slow,
        _,
    ):
        held = slow_clients(server, slow, 6)  # three times the worker threads
        other = server.open_session("other", "openai-chat", sampling=Sampling())
        reply = chat_client(server, other).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "quick"}]
        )
        assert reply.choices[0].message.content == "reply"
        assert finish(held) == [200] * 6
        wait_until(lambda: server.in_flight.total == 0, "every place freed")


def test_a_session_past_its_cap_gets_a_429_in_its_api_shape():
    with scripted_proxy(
        DIALECTS, ["reply"] * 4, dialect="anthropic-messages", max_in_flight_per_session=2
    ) as (server, claude, _):
        held = slow_clients(server, claude, 2, "/v1/messages")
        client = anthropic.Anthropic(
            base_url=claude.base_url(server.url), api_key=claude.api_key, max_retries=0
        )
        messages = [{"role": "user", "content": "hi"}]
        with pytest.raises(anthropic.RateLimitError) as info:
            client.messages.create(model="m", max_tokens=5, messages=messages)
        body = info.value.body
        assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error"
        assert "max_in_flight_per_session" in body["error"]["message"]
        assert info.value.response.headers["retry-after"] == "1"
        assert claude.rejected == [f"429 rate_limit_exceeded: {body['error']['message']}"]
        other = server.open_session("other", "openai-chat", sampling=Sampling())
        assert chat_client(server, other).chat.completions.create(model="m", messages=messages)
        assert finish(held[:1]) == [200]
        wait_until(lambda: server.in_flight.by_session.get(claude.id) == 1, "one place freed")
        assert client.messages.create(model="m", max_tokens=50, messages=messages).content
        assert finish(held[1:]) == [200]


def test_the_overall_cap_spans_sessions():
    with scripted_proxy(DIALECTS, ["reply"] * 3, max_in_flight=2) as (server, first, _):
        second = server.open_session("second", "openai-chat", sampling=Sampling())
        third = server.open_session("third", "openai-chat", sampling=Sampling())
        held = slow_clients(server, first, 1) + slow_clients(server, second, 1)
        with pytest.raises(openai.RateLimitError) as info:
            chat_client(server, third).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
        assert info.value.body["code"] == "rate_limit_exceeded"
        assert "ProxyServer max_in_flight)" in info.value.body["message"]
        assert finish(held) == [200, 200]


def test_the_overall_cap_defaults_to_the_worker_threads():
    server = ProxyServer(
        ScriptedInference(tiny_chat_tokenizer(), []), DIALECTS, model_name="m", max_workers=7
    )
    assert (server.in_flight.overall, server.in_flight.per_session) == (7, 16)
    with pytest.raises(ValueError, match="at least 1"):
        ProxyServer(
            ScriptedInference(tiny_chat_tokenizer(), []),
            DIALECTS,
            model_name="m",
            max_in_flight_per_session=0,
        )


class GatedInference(ScriptedInference):
    """Generation waits until ``release`` is set."""

    def __init__(self, replies):
        super().__init__(tiny_chat_tokenizer(), replies)
        self.release = threading.Event()

    def generate(self, prompt_ids, sampling, on_token=None):
        assert self.release.wait(HANG_GUARD_S)
        return super().generate(prompt_ids, sampling, on_token)


@pytest.mark.parametrize("stream", [False, True])
def test_a_generation_holds_its_place_until_it_ends(stream):
    inference = GatedInference(["first", "third"])
    server = ProxyServer(
        inference, DIALECTS, model_name="m", max_in_flight_per_session=1, freeze_heap=False
    )
    server.start()
    try:
        session = server.open_session("s", "openai-chat", sampling=Sampling(max_tokens=50))
        client = chat_client(server, session)
        messages = [{"role": "user", "content": "hi"}]
        got = []

        def first():
            reply = client.chat.completions.create(model="m", messages=messages, stream=stream)
            if stream:
                got.append("".join(c.choices[0].delta.content or "" for c in reply if c.choices))
            else:
                got.append(reply.choices[0].message.content)

        worker = threading.Thread(target=first)
        worker.start()
        wait_until(lambda: server.in_flight.total == 1, "the first request in flight")
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="m", messages=messages)
        inference.release.set()
        worker.join(HANG_GUARD_S)
        assert got == ["first"]
        wait_until(lambda: server.in_flight.total == 0, "the generation's place freed")
        reply = client.chat.completions.create(model="m", messages=messages)
        assert reply.choices[0].message.content == "third"
    finally:
        server.stop()


def test_a_client_gone_mid_body_gives_its_place_back():
    with scripted_proxy(DIALECTS, [], max_in_flight_per_session=1) as (server, session, _):
        [client] = slow_clients(server, session, 1)
        client.close()
        wait_until(lambda: server.in_flight.total == 0, "the abandoned request's place freed")
        wait_until(lambda: session.rejected, "the abandoned request noted")
        assert session.rejected[0].startswith("400 invalid_request: the client went away")
