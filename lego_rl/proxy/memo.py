"""Reuse the parse of a conversation's earlier messages: a harness re-sends its whole history
on every call, and parsing it again costs more, turn after turn, than the new messages do.

Exact by construction: a dialect's ``parse_one(raw, index)`` depends on the raw message alone
(``index`` only names it in error messages), and a cached parse is reused only for a message
whose JSON text is the cached one's. JSON text tells apart what Python equality does not
(``1``, ``1.0`` and ``True``; ``0.0`` and ``-0.0``; dict key order, which ``json.dumps`` of
tool arguments keeps). The texts are written by orjson (~8x faster than ``json``; integers past
64 bits by ``json``), which writes NaN and infinities as ``null``: the server's JSON reader
refuses those, so only an in-process caller could pass them. The texts are plain bytes, so the
memo gives the garbage collector nothing to walk but its parsed messages.

A body read as texts (:mod:`lego_rl.proxy.jsontexts`) gives each message's text as the harness
wrote it: :meth:`MessageMemo.parse_texts` keys on those, with no serialising at all.

Parsed messages are shared between the requests that reuse them: nobody may mutate them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lego_rl.kinds import ChatMessage
from lego_rl.proxy.jsonio import dumps, loads

ParseOne = Callable[[Any, int], list[ChatMessage]]
"""Parse one raw message (at its index in the request) into neutral messages."""

@dataclass
class _Conversation:
    texts: list[bytes]
    """The JSON text of each raw message."""
    parsed: list[list[ChatMessage]]


class MessageMemo:
    """The parsed messages of the ``size`` most recently seen conversations.

    A request reuses the longest cached conversation its messages start with and replaces
    it (the conversation moved on), so a session's entry follows its latest call. Entries are
    found by (message count, last message's text): a dict lookup per candidate length."""

    def __init__(self, parse_one: ParseOne, size: int = 256):
        self.parse_one, self.size = parse_one, size
        self.entries: OrderedDict[tuple[int, bytes], _Conversation] = OrderedDict()
        self.lock = threading.Lock()
        self.reused = self.parsed = 0

    def _longest(self, texts: list[bytes]) -> tuple[int, bytes] | None:
        for k in range(len(texts), 0, -1):
            entry = self.entries.get((k, texts[k - 1]))
            if entry is not None and entry.texts == texts[:k]:
                return (k, texts[k - 1])
        return None

    def parse(self, raw: list[Any]) -> list[ChatMessage]:
        """The neutral messages of ``raw`` (a request's raw messages), in order."""
        try:
            texts = [dumps(message) for message in raw]
        except (TypeError, ValueError):  # not JSON (an in-process caller): parse, keep nothing
            return [m for i, message in enumerate(raw) for m in self.parse_one(message, i)]
        return self._parse(texts, raw.__getitem__)

    def parse_texts(self, texts: list[bytes]) -> list[ChatMessage]:
        """The same from the raw messages' JSON texts as a body has them (a new one is read by
        :func:`lego_rl.proxy.jsonio.loads`; ValueError when it is not JSON)."""
        return self._parse(texts, lambda i: loads(texts[i]))

    def _parse(self, texts: list[bytes], raw: Callable[[int], Any]) -> list[ChatMessage]:
        with self.lock:
            key = self._longest(texts)
            known = self.entries[key].parsed if key is not None else []
        parsed = known + [self.parse_one(raw(i), i) for i in range(len(known), len(texts))]
        with self.lock:
            self.reused += len(known)
            self.parsed += len(texts) - len(known)
            if key is not None:
                self.entries.pop(key, None)
            if texts:
                self.entries[(len(texts), texts[-1])] = _Conversation(texts, parsed)
                self.entries.move_to_end((len(texts), texts[-1]))
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
        return [m for messages in parsed for m in messages]
