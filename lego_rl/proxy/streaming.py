"""Streaming pieces shared by every dialect: token ids -> text deltas, SSE frames, formatters.

A dialect that streams (every first-party one) is a :class:`lego_rl.kinds.StreamingDialect`:
``stream(request, call_id)`` returns a :class:`~lego_rl.kinds.StreamFormatter`, which the
pipeline feeds the parser's events as tokens are sampled, writing the SSE text it returns
straight to the client.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from lego_rl.kinds import StreamFormatter, StreamingDialect
from lego_rl.proxy.jsonio import dumps_text
from lego_rl.proxy.render import decode

__all__ = ["REPLACEMENT", "IncrementalDecoder", "StreamFormatter", "StreamingDialect", "fragments", "sse"]

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
