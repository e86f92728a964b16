"""Soak: large and refused requests across sessions leave the proxy's memory where it was.

Bounded by a fixed number of requests over loopback, never by the clock. Memory is read in
two deterministic ways rather than as RSS (which the allocator returns to the system when it
pleases, and which other processes' load does not change but our arenas' layout does): the
caches' own byte accounting (:func:`lego_rl.proxy.budgets.cache_bytes`), which must be back to
the byte after each refused request, and what :mod:`tracemalloc` sees still allocated after a
collection, which must stay within :data:`RETAINED_BOUND` (the bodies sent add up to ~90 MB;
before the budgets each refused MB kept ~15 MB: the chunk cache's ids, the memo's copy of the
array, the thread's rendering and texts).
"""

from __future__ import annotations

import gc
import json
import re
import tracemalloc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
from legorl_std.dialects.anthropic import AnthropicDialect
from legorl_std.dialects.openai_chat import OpenAIChatDialect
from legorl_std.dialects.openai_responses import OpenAIResponsesDialect

from lego_rl.data import Sampling
from lego_rl.proxy.budgets import cache_bytes
from lego_rl.proxy.server import ProxyServer
from lego_rl.testing.scripted_inference import ScriptedInference
from lego_rl.tiny_tokenizer import SPECIAL_TOKENS, TinyChatTokenizer

REFUSED = 64
"""Distinct refused bodies, ~0.5-2 MB each, over the sessions of three dialects."""
SESSIONS = 6
RETAINED_BOUND = 4 << 20
"""Bytes still allocated after the refused requests, over what was before them: ~5% of what
they sent, where the proxy before the budgets kept ~14 times it (~1 GB). Measured: 0.12-0.14 MB
run alone (the sessions' refusal messages, the server's bookkeeping); up to 2.2 MB after the
other proxy test files in one process (what a transport or worker still holds of the last
~2 MB body, and earlier tests' leftovers allocating meanwhile), hence the margin."""
SYSTEM = "You are a coding agent. " * 200
TOOLS = [{"name": f"tool{i}", "description": "Does things. " * 40} for i in range(8)]


class ByteTokenizer(TinyChatTokenizer):
    """The tiny byte-level tokenizer, encoded in Python at memcpy speed (its Rust twin takes
    ~3 us a character on a megabyte without merges): a special token is one id, every other
    byte its own."""

    backend_tokenizer = None
    _SPLIT = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")

    def __init__(self) -> None:
        super().__init__()
        self.backend_tokenizer = None
        self.special = {t: 256 + i for i, t in enumerate(SPECIAL_TOKENS)}
        self.by_id = {i: t for t, i in self.special.items()}
        self.eos_token_id = self.special[self.eos_token]

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids: list[int] = []
        for part in self._SPLIT.split(text):
            if part in self.special:
                ids.append(self.special[part])
            elif part:
                ids += part.encode("utf-8", "surrogatepass")
        return ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False, **_: Any) -> str:
        out, run = [], bytearray()
        for i in ids:
            if i < 256:
                run.append(i)
                continue
            out.append(run.decode("utf-8", "replace"))
            run = bytearray()
            out.append("" if skip_special_tokens else self.by_id[i])
        out.append(run.decode("utf-8", "replace"))
        return "".join(out)


def big(n: int) -> str:
    """A distinct tool output of ~0.5-2 MB (lines, as tool output comes)."""
    lines = (500_000 + (n % 4) * 500_000) // 40
    return "\n".join(f"{n:03d} line {j} of a long tool output ..." for j in range(lines))


Turns = list[str]
"""A conversation as its user turns (the assistant answered "ok" to each)."""


def body(dialect: str, turns: Turns) -> bytes:
    if dialect == "anthropic-messages":
        messages: list[dict[str, Any]] = []
        for text in turns:
            messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]
        tools = [{**t, "input_schema": {"type": "object"}} for t in TOOLS]
        out = {"model": "m", "max_tokens": 8, "system": SYSTEM, "tools": tools}
        return json.dumps({**out, "messages": messages[:-1]}).encode()
    functions = [{"name": t["name"], "description": t["description"]} for t in TOOLS]
    if dialect == "openai-chat":
        chat: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        for text in turns:
            chat += [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]
        tools = [{"type": "function", "function": f} for f in functions]
        return json.dumps({"model": "m", "messages": chat[:-1], "tools": tools}).encode()
    items: list[dict[str, Any]] = [{"type": "message", "role": "developer", "content": SYSTEM}]
    for text in turns:
        items += [
            {"type": "message", "role": "user", "content": text},
            {"type": "message", "role": "assistant", "content": "ok"},
        ]
    tools = [{"type": "function", **f} for f in functions]
    return json.dumps({"model": "m", "input": items[:-1], "tools": tools, "store": False}).encode()


DIALECTS = {
    "anthropic-messages": (AnthropicDialect, "/v1/messages"),
    "openai-chat": (OpenAIChatDialect, "/v1/chat/completions"),
    "openai-responses": (OpenAIResponsesDialect, "/v1/responses"),
}


@contextmanager
def proxy(max_context: int) -> Iterator[ProxyServer]:
    tokenizer = ByteTokenizer()
    server = ProxyServer(
        ScriptedInference(tokenizer, ["ok"] * 1000),
        {name: make() for name, (make, _) in DIALECTS.items()},
        model_name="m",
        max_context=max_context,
        freeze_heap=False,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def test_refused_megabyte_bodies_leave_every_cache_and_the_heap_as_they_were():
    with proxy(max_context=65_536) as server, httpx.Client(timeout=None) as client:
        names = list(DIALECTS)
        sessions = [
            server.open_session(f"soak-{i}", names[i % 3], sampling=Sampling(max_tokens=8))
            for i in range(SESSIONS)
        ]
        turns: dict[str, Turns] = {s.id: [] for s in sessions}

        def post(session: Any, conversation: Turns) -> httpx.Response:
            url = f"{server.url}/s/{session.id}{DIALECTS[session.dialect][1]}"
            data = body(session.dialect, conversation)
            return client.post(url, content=data, headers={"x-api-key": session.api_key})

        def refuse(session: Any, conversation: Turns) -> int:
            """Bytes sent for a body refused for its length (nothing of it kept here)."""
            reply = post(session, conversation)
            assert reply.status_code == 400, reply.text[:300]
            assert "maximum context length" in reply.text
            return len(reply.request.content)

        for step in range(2):  # each session's conversation, cached
            for s in sessions:
                turns[s.id].append(f"task {s.id} step {step}")
                assert post(s, turns[s.id]).status_code == 200
        gc.collect()  # what earlier tests left to collect goes now, not between two readings
        held = cache_bytes()
        assert held["tokenizer.chunks"] > 0 and held["anthropic-messages.messages.arrays"] > 0
        tracemalloc.start()
        try:
            before = traced()
            sent = 0
            for n in range(REFUSED):
                session = sessions[n % SESSIONS]
                sent += refuse(session, [*turns[session.id], big(n)])
                assert cache_bytes() == held, f"refused request {n} left cache entries"
            retained = traced() - before
            for s in sessions:  # the conversations go on where they were
                turns[s.id].append("after")
                assert post(s, turns[s.id]).status_code == 200
                assert [c.extends_previous for c in s.calls] == [False, True, True]
            still_open = traced()
            closed = [server.close_session(s.id) for s in sessions]
            freed = still_open - traced()
        finally:
            tracemalloc.stop()
        assert sent > 60 * 500_000
        assert retained < RETAINED_BOUND, f"{retained} bytes retained after {sent} bytes refused"
        print(f"refused {sent} bytes: {retained} retained; closing freed {freed}")
        assert freed >= 0  # closing frees (the sessions' arrays, renderings, contexts), adds nothing
        arrays = {name: d.memo.arrays.nbytes for name, d in server.dialects.items()}
        assert arrays == dict.fromkeys(DIALECTS, 0)  # the sessions' own entries went with them
        assert all(t.rendering is None and t.context is None for s in closed for t in s.threads)
        assert sum(len(s.calls) for s in closed) == 3 * SESSIONS  # records kept


def test_large_accepted_bodies_keep_every_cache_within_its_budget():
    with proxy(max_context=4_000_000) as server, httpx.Client(timeout=None) as client:
        handler = server.handler
        assert handler.prefix_cache is not None
        chunks = handler.prefix_cache.chunks.entries
        chunks.budget = 8 << 20
        dialect = server.dialects["openai-chat"]
        dialect.memo.arrays.budget = 8 << 20
        for n in range(8):
            session = server.open_session(f"big-{n}", "openai-chat", sampling=Sampling(max_tokens=8))
            url = f"{server.url}/s/{session.id}/v1/chat/completions"
            data = body("openai-chat", [big(n)])
            reply = client.post(url, content=data, headers={"x-api-key": session.api_key})
            assert reply.status_code == 200, reply.text[:300]
            assert 0 < chunks.nbytes <= chunks.budget
            assert dialect.memo.arrays.nbytes <= dialect.memo.arrays.budget
            server.close_session(session.id)
            assert dialect.memo.arrays.nbytes == 0  # the session's arrays went with it
        assert chunks.nbytes == sum(e.nbytes for e in chunks.entries.values())


def test_a_refused_count_leaves_nothing():
    with proxy(max_context=8192) as server, httpx.Client(timeout=None) as client:
        session = server.open_session("count", "anthropic-messages", sampling=Sampling())
        gc.collect()
        held = cache_bytes()
        url = f"{server.url}/s/{session.id}/v1/messages/count_tokens"
        wrong = {**json.loads(body("anthropic-messages", [big(1)])), "tools": 7}
        reply = client.post(url, json=wrong, headers={"x-api-key": session.api_key})
        assert reply.status_code == 400, reply.text[:300]
        assert cache_bytes() == held
