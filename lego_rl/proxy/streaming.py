"""Streaming pieces shared by every dialect: token ids -> text deltas, SSE frames, formatters.

A dialect that streams (every first-party one) has ``stream(request, call_id)`` returning a
:class:`StreamFormatter`: the pipeline feeds it the parser's events as tokens are sampled
and writes the SSE text it returns straight to the client.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from lego_rl.kinds import ChatCompletion, ChatRequest
from lego_rl.proxy.jsonio import dumps_text
from lego_rl.proxy.render import decode
from lego_rl.proxy.toolcalls import StreamEvent

REPLACEMENT = "\ufffd"


class IncrementalDecoder:
    """Turns sampled ids into text deltas; a multi-byte character split across tokens is
    held back until its last byte arrives (the decoded text ends in U+FFFD until then).
    Decoding looks only at a short window of recent ids, so each token costs O(1)."""

    def __init__(self, tokenizer: Any, skip: Sequence[int] = ()):
        self.tokenizer = tokenizer
        self.skip = frozenset(skip)
        self.ids: list[int] = []
        self.prefix = 0
        self.read = 0

    def _decode(self, ids: list[int]) -> str:
        return decode(self.tokenizer, ids)

    def push(self, token: int) -> str:
        if token in self.skip:
            return ""
        self.ids.append(token)
        before = self._decode(self.ids[self.prefix : self.read])
        now = self._decode(self.ids[self.prefix :])
        if len(now) > len(before) and not now.endswith(REPLACEMENT):
            self.prefix, self.read = self.read, len(self.ids)
            return now[len(before) :]
        return ""


def sse(data: Any, event: str | None = None) -> str:
    """One server-sent event; ``data`` is JSON-encoded unless it is already a string."""
    payload = data if isinstance(data, str) else dumps_text(data)
    return (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"


def fragments(text: str, size: int = 48) -> Iterator[str]:
    """A string in pieces, as streaming APIs send tool-call arguments."""
    for start in range(0, len(text), size):
        yield text[start : start + size]


@runtime_checkable
class StreamFormatter(Protocol):
    """One streamed reply in a dialect's SSE events. Each method returns SSE text ('' for none)."""

    def start(self, prompt_tokens: int) -> str: ...

    def event(self, event: StreamEvent) -> str: ...

    def finish(self, completion: ChatCompletion) -> str: ...

    def fail(self, status: int, message: str, kind: str) -> str:
        """The stream broke after it started (the backend failed mid-generation)."""
        ...


@runtime_checkable
class StreamingDialect(Protocol):
    def stream(self, request: ChatRequest, call_id: str) -> StreamFormatter: ...
