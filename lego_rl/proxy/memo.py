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

A body read as texts (:mod:`lego_rl.proxy.jsontexts`) gives the messages array as the harness
wrote it: :meth:`MessageMemo.parse_array` recognises an earlier call's array at its start, byte
for byte, and reads only the items after it (no serialising, no split of the known items).

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
from lego_rl.proxy.jsontexts import item_texts

ParseOne = Callable[[Any, int], list[ChatMessage]]
"""Parse one raw message (at its index in the request) into neutral messages."""

_PER_SCOPE = 4
"""Arrays kept per scope: its latest conversations (a session's main agent and sub-agents)."""


@dataclass(eq=False)
class _Array:
    head: memoryview
    """The array's text up to its last item (no closing bracket, no whitespace before it): a
    view of the request's bytes, not a copy of them."""
    parsed: list[list[ChatMessage]]


@dataclass
class _Conversation:
    texts: list[bytes]
    """The JSON text of each raw message."""
    parsed: list[list[ChatMessage]]


def _head(array: bytes) -> memoryview:
    end = array.rindex(b"]")
    while end and array[end - 1] in b" \t\r\n":
        end -= 1
    return memoryview(array)[:end]


class MessageMemo:
    """The parsed messages of the ``size`` most recently seen conversations.

    A request reuses the longest cached conversation its messages start with and replaces
    it (the conversation moved on), so a session's entry follows its latest call. Entries are
    found by (message count, last message's text): a dict lookup per candidate length."""

    def __init__(self, parse_one: ParseOne, size: int = 256):
        self.parse_one, self.size = parse_one, size
        self.entries: OrderedDict[tuple[int, bytes], _Conversation] = OrderedDict()
        self.arrays: OrderedDict[bytes, list[_Array]] = OrderedDict()
        """Arrays read by :meth:`parse_array` by scope, least recently used scope first; ``held``
        of them in all, at most ``size``."""
        self.held = 0
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
        return self._parse(texts, raw)

    def parse_array(self, array: bytes, scope: str = "") -> list[ChatMessage] | None:
        """The same from the messages array's JSON text as a body has it; None when it is not
        a non-empty array. Of the last arrays of ``scope`` (a session: its main conversation
        and sub-agents), the longest that ``array`` starts with, byte for byte up to its last
        item, followed by a comma or the end, gives the messages it had: a JSON value's text
        decides its value, so those items are the earlier array's. Only the items after them
        are read (:func:`lego_rl.proxy.jsonio.loads`; ValueError when one is not JSON)."""
        with self.lock:
            candidates = list(self.arrays.get(scope, ()))
        known, new = None, None
        for entry in candidates:
            if known is not None and len(entry.head) <= len(known.head):
                continue
            if len(entry.head) < len(array) and array.startswith(entry.head):
                rest = array[len(entry.head) :].lstrip()
                if rest == b"]":
                    known, new = entry, []
                elif rest[:1] == b",":
                    items = item_texts(b"[" + rest[1:])
                    if items is not None:
                        known, new = entry, items
        if known is None or new is None:
            known, new = None, item_texts(array)
            if not new:
                return None
        earlier = known.parsed if known is not None else []
        parsed = earlier + [
            self.parse_one(loads(text), i) for i, text in enumerate(new, start=len(earlier))
        ]
        with self.lock:
            self.reused += len(earlier)
            self.parsed += len(new)
            entries = self.arrays.setdefault(scope, [])
            self.arrays.move_to_end(scope)
            if known is not None and not new:  # the same array again (a retry)
                return [m for messages in parsed for m in messages]
            if known is not None and known in entries:
                entries.remove(known)  # the conversation moved on
                self.held -= 1
            entries.append(_Array(_head(array), parsed))
            self.held += 1
            if len(entries) > _PER_SCOPE:
                entries.pop(0)
                self.held -= 1
            while self.held > self.size:
                oldest = next(iter(self.arrays.values()))
                if oldest:
                    oldest.pop(0)
                    self.held -= 1
                if not oldest:
                    self.arrays.popitem(last=False)
        return [m for messages in parsed for m in messages]

    def _parse(self, texts: list[bytes], raw: list[Any]) -> list[ChatMessage]:
        with self.lock:
            key = self._longest(texts)
            known = self.entries[key].parsed if key is not None else []
        parsed = known + [self.parse_one(raw[i], i) for i in range(len(known), len(texts))]
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
