"""A client that goes away mid-generation: the generation stops (counted in tokens, never by the
clock), the call's place in flight is freed, and the call is recorded as cut by the client,
which the recorder never trains."""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import httpx
import pytest
from legorl_std.dialects.anthropic import AnthropicDialect
from legorl_std.dialects.openai_chat import OpenAIChatDialect
from legorl_std.dialects.openai_responses import OpenAIResponsesDialect

from lego_rl.data import CLIENT_DISCONNECT, CallRecord, Sampling
from lego_rl.kinds import AbortsGenerations
from lego_rl.proxy.recorder import assemble, kept_calls
from lego_rl.proxy.server import ProxyServer
from lego_rl.testing.scripted_inference import AbortableScriptedInference, ScriptedInference
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer
from lego_rl.token_ids import TokenIds

LONG = "x" * 3000
"""The scripted reply: 3000 tokens and eos with the byte-level tokenizer."""
TOTAL = len(LONG) + 1
DELAY = 0.002
"""Seconds between tokens: a whole reply takes ~6 s, a disconnect is seen within one token."""
DIALECTS = {
    "openai-chat": (OpenAIChatDialect, "/v1/chat/completions", b'"content":"x'),
    "anthropic-messages": (AnthropicDialect, "/v1/messages", b"text_delta"),
    "openai-responses": (OpenAIResponsesDialect, "/v1/responses", b"output_text.delta"),
}


def body_for(dialect: str, stream: bool, text: str = "write a lot") -> bytes:
    if dialect == "openai-chat":
        body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    elif dialect == "anthropic-messages":
        body = {"model": "m", "max_tokens": 4000, "messages": [{"role": "user", "content": text}]}
    else:
        body = {"model": "m", "input": text}
    return json.dumps({**body, "stream": stream}).encode()


def started(dialect: str, inference: ScriptedInference):
    server = ProxyServer(
        inference, {dialect: DIALECTS[dialect][0]()}, model_name="tiny-policy", max_context=8192
    )
    server.start()
    session = server.open_session("trial-1", dialect, sampling=Sampling(max_tokens=4000))
    return server, session


def post_and_leave(server, session, path: str, body: bytes, wait_for) -> bytes:
    """POST ``body`` on a raw connection, read until ``wait_for(received)`` holds, hang up."""
    address = urlsplit(server.url)
    sock = socket.create_connection((address.hostname, address.port))
    head = (
        f"POST /s/{session.id}{path} HTTP/1.1\r\nhost: {address.netloc}\r\n"
        f"x-api-key: {session.api_key}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    received = b""
    sock.settimeout(0.01)
    while not wait_for(received):
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        assert chunk, f"the server closed first: {received[-300:]!r}"
        received += chunk
    sock.shutdown(socket.SHUT_RDWR)
    sock.close()
    return received


def recorded(server, session) -> CallRecord:
    """The call's record once the proxy has let go of it (polled: bounded by the test timeout)."""
    while not (session.calls and server.in_flight.total == 0):
        time.sleep(0.005)
    (record,) = session.calls
    return record


def assert_cut_and_not_trained(server, session, record: CallRecord) -> None:
    assert record.finish_reason == CLIENT_DISCONNECT and record.error is None
    assert len(record.completion_ids) == len(record.logprobs)
    trajectory = session.trajectory()
    assert trajectory.segments == [] and trajectory.rolled_back == [0]
    assert session.metrics()[0]["trained_tokens"] == 0.0
    assert server.in_flight.by_session == {} and session.started == 0


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_client_that_hangs_up_aborts_its_generation(dialect, stream):
    replies = [LONG, "short"]
    inference = AbortableScriptedInference(tiny_chat_tokenizer(), replies, token_delay=DELAY)
    assert isinstance(inference, AbortsGenerations)
    server, session = started(dialect, inference)
    try:
        _, path, delta = DIALECTS[dialect]
        if stream:  # hang up once the reply has begun to arrive
            received = post_and_leave(
                server, session, path, body_for(dialect, True), lambda got: delta in got
            )
            assert b"200 OK" in received.split(b"\r\n")[0]
        else:  # hang up once the backend has begun to generate
            post_and_leave(
                server, session, path, body_for(dialect, False), lambda _: inference.token_times
            )
        record = recorded(server, session)
        assert inference.aborted == [True]
        assert 0 < inference.drawn[0] < TOTAL  # stopped early, by its token count
        assert list(record.completion_ids) == inference.tokenizer.encode(LONG)[: inference.drawn[0]]
        assert_cut_and_not_trained(server, session, record)
        # The harness's retry is an ordinary call: it is the one trained.
        retry = httpx.post(
            session.base_url(server.url) + path,
            content=body_for(dialect, False),
            headers={"x-api-key": session.api_key, "content-type": "application/json"},
        )
        assert retry.status_code == 200 and "short" in retry.text
        assert [c.finish_reason for c in session.calls] == [CLIENT_DISCONNECT, "stop"]
        trajectory = session.trajectory()
        assert [s.calls for s in trajectory.segments] == [[1]] and trajectory.rolled_back == [0]
        assert session.started == 1
    finally:
        server.stop()


def test_a_backend_without_abort_is_stopped_at_its_next_streamed_token():
    inference = ScriptedInference(tiny_chat_tokenizer(), [LONG], token_delay=DELAY)
    assert not isinstance(inference, AbortsGenerations)
    server, session = started("openai-chat", inference)
    try:
        post_and_leave(
            server,
            session,
            "/v1/chat/completions",
            body_for("openai-chat", True),
            lambda got: b'"content":"x' in got,
        )
        record = recorded(server, session)
        assert 0 < inference.drawn[0] < TOTAL and inference.aborted == [True]
        # The token whose on_token raised was drawn but never sent: it is not in the record.
        assert len(record.completion_ids) == inference.drawn[0] - 1
        assert_cut_and_not_trained(server, session, record)
    finally:
        server.stop()


def test_a_plain_call_on_a_backend_without_abort_runs_out_but_is_recorded_as_cut():
    reply = "y" * 300
    inference = ScriptedInference(tiny_chat_tokenizer(), [reply], token_delay=DELAY)
    server, session = started("openai-chat", inference)
    try:
        post_and_leave(
            server,
            session,
            "/v1/chat/completions",
            body_for("openai-chat", False),
            lambda _: inference.token_times,
        )
        record = recorded(server, session)
        assert inference.drawn == [len(reply) + 1]  # nothing could stop it
        assert_cut_and_not_trained(server, session, record)
    finally:
        server.stop()


def test_a_reply_read_whole_is_an_ordinary_call():
    inference = AbortableScriptedInference(tiny_chat_tokenizer(), ["short"], token_delay=DELAY)
    server, session = started("openai-chat", inference)
    try:
        post_and_leave(
            server,
            session,
            "/v1/chat/completions",
            body_for("openai-chat", True),
            lambda got: b"data: [DONE]" in got,
        )
        record = recorded(server, session)
        assert record.finish_reason == "stop" and inference.aborted == [False]
        assert [s.calls for s in session.trajectory().segments] == [[0]]
    finally:
        server.stop()


def call(index: int, prompt: list[int], completion: list[int], finish: str = "stop") -> CallRecord:
    return CallRecord(
        session="s",
        index=index,
        dialect="openai-chat",
        prompt_ids=TokenIds(prompt),
        completion_ids=TokenIds(completion),
        logprobs=tuple(-0.1 for _ in completion),
        finish_reason=finish,
    )


def test_the_recorder_rolls_back_a_cut_call_like_a_retried_one():
    calls = [
        call(0, [1, 2], [3]),
        call(1, [1, 2, 3, 4], [5, 6], CLIENT_DISCONNECT),
        call(2, [1, 2, 3, 4], [7]),  # the retry
        call(3, [1, 2, 3, 4, 7, 8], [9], CLIENT_DISCONNECT),
    ]
    kept, rolled_back = kept_calls(calls)
    assert [c.index for c in kept] == [0, 2] and rolled_back == [1, 3]
    trajectory = assemble(calls, "s")
    assert [s.calls for s in trajectory.segments] == [[0, 2]]
    assert trajectory.segments[0].ids == [1, 2, 3, 4, 7]
    assert trajectory.rolled_back == [1, 3]
    assert 5 not in trajectory.segments[0].ids and 9 not in trajectory.segments[0].ids
