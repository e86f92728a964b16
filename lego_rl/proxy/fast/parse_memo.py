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

A body read as texts (:mod:`lego_rl.proxy.fast.body_texts`) gives the messages array as the harness
wrote it: :meth:`MessageMemo.parse_array` recognises an earlier call's array at its start, byte
for byte, and reads only the items after it (no serialising, no split of the known items).

Parsed messages are shared between the requests that reuse them: nobody may mutate them.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lego_rl.kinds import ChatMessage
from lego_rl.proxy.budgets import ByteLRU, Entry, MiB, size_of
from lego_rl.proxy.fast.body_texts import item_texts
from lego_rl.proxy.jsonio import dumps, loads

ParseOne = Callable[[Any, int], list[ChatMessage]]
"""Parse one raw message (at its index in the request) into neutral messages."""

_PER_SCOPE = 4
"""Arrays kept per scope: its latest conversations (a session's main agent and sub-agents)."""


@dataclass(eq=False)
class _Array:
    head: memoryview
    """The array's text up to its last item (no closing bracket, no whitespace before it): a
    view of the array's bytes as the body had them, not a copy of them."""
    parsed: list[list[ChatMessage]]
    parsed_bytes: int
    """What ``parsed`` keeps alive (the earlier array's parses included)."""

    @property
    def nbytes(self) -> int:
        return sys.getsizeof(self.head) + sys.getsizeof(self.head.obj) + self.parsed_bytes


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
    """The parsed messages of the most recently seen conversations, up to ``budget`` bytes
    (:mod:`lego_rl.proxy.budgets`: texts and parses, what a failed request put taken back).

    A request reuses the longest cached conversation its messages start with and replaces
    it (the conversation moved on), so a session's entry follows its latest call. Entries are
    found by (message count, last message's text): a dict lookup per candidate length. Arrays
    read by :meth:`parse_array` belong to their scope (a session), dropped when it closes."""

    def __init__(self, parse_one: ParseOne, name: str = "messages", budget: int = 256 * MiB):
        self.parse_one = parse_one
        self.entries: ByteLRU[tuple[int, bytes], _Conversation] = ByteLRU(
            f"{name}.conversations", budget
        )
        self.arrays: ByteLRU[tuple[str, int], _Array] = ByteLRU(f"{name}.arrays", budget)
        """Arrays read by :meth:`parse_array`, by (scope, serial); at most ``_PER_SCOPE`` a
        scope."""
        self.lock = threading.Lock()
        self.reused = self.parsed = 0
        self._serial = 0

    def _longest(self, texts: list[bytes]) -> tuple[int, bytes] | None:
        for k in range(len(texts), 0, -1):
            entry = self.entries.get((k, texts[k - 1]))
            if entry is not None and entry.value.texts == texts[:k]:
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
        candidates = self.arrays.scoped(scope)
        known: Entry[tuple[str, int], _Array] | None = None
        new: list[bytes] | None = None
        for entry in candidates:
            head = entry.value.head
            if known is not None and len(head) <= len(known.value.head):
                continue
            if len(head) < len(array) and array.startswith(head):
                rest = array[len(head) :].lstrip()
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
        earlier = known.value.parsed if known is not None else []
        fresh = [self.parse_one(loads(text), i) for i, text in enumerate(new, start=len(earlier))]
        parsed = earlier + fresh
        with self.lock:
            self.reused += len(earlier)
            self.parsed += len(new)
            self._serial += 1
            serial = self._serial
        if known is not None and not new:  # the same array again (a retry)
            return [m for messages in parsed for m in messages]
        if known is not None:
            self.arrays.discard(known)  # the conversation moved on
        parsed_bytes = (known.value.parsed_bytes if known is not None else 0) + size_of(fresh)
        kept = _Array(_head(array), parsed, parsed_bytes)
        self.arrays.put((scope, serial), kept, kept.nbytes, scope)
        for old in self.arrays.scoped(scope)[:-_PER_SCOPE]:
            self.arrays.discard(old)
        return [m for messages in parsed for m in messages]

    def _parse(self, texts: list[bytes], raw: list[Any]) -> list[ChatMessage]:
        key = self._longest(texts)
        found = self.entries.get(key) if key is not None else None
        known = found.value.parsed if found is not None else []
        fresh = [self.parse_one(raw[i], i) for i in range(len(known), len(texts))]
        parsed = known + fresh
        with self.lock:
            self.reused += len(known)
            self.parsed += len(texts) - len(known)
        if found is not None:
            self.entries.discard(found)
        if texts:
            grown = size_of(texts[len(known) :]) + size_of(fresh)
            nbytes = (found.nbytes if found is not None else size_of([[], []])) + grown
            conversation = _Conversation(texts, parsed)
            self.entries.put((len(texts), texts[-1]), conversation, nbytes)
        return [m for messages in parsed for m in messages]
