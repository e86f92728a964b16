"""A request body read only as far as its top-level fields and the items of an array, each
kept as its JSON text, so a dialect parses only what it has not seen before.

A harness re-sends its system prompt, tool list and whole history on every call: ~75-180 KB
for Claude Code, of which a call adds a few hundred bytes. Reading the whole body into Python
objects (orjson: ~0.1 ms hot, ~0.25 ms with cold caches on these machines) and serialising
each message again to recognise it cost more than everything the new messages need. msgspec
splits the body into texts at ~40% of that cost and creates no objects inside them; a text
seen before maps to its earlier parse (:class:`TextMemo`, the message memo), and a new one is
read by :func:`lego_rl.proxy.jsonio.loads`, with the standard library's meaning.

Whatever msgspec cannot split (not an object, not JSON, not UTF-8, nested past its recursion
limit) gives None: the caller reads the body the ordinary way, whose error says what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar, overload

import msgspec

from lego_rl.proxy.budgets import ByteLRU, Entry, MiB, size_of
from lego_rl.proxy.jsonio import loads

_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


def field_texts(body: bytes) -> dict[str, bytes] | None:
    """The JSON text of each top-level field of ``body`` (the last of repeated keys, as
    ``json.loads`` keeps), or None when ``body`` is not a JSON object."""
    try:
        fields = _FIELDS.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    return {key: bytes(text) for key, text in fields.items()}


def item_texts(array: bytes) -> list[bytes] | None:
    """The JSON text of each item of the array ``array``, or None when it is not an array."""
    try:
        items = _ITEMS.decode(array)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    return [bytes(text) for text in items]


FieldTexts = tuple[tuple[str, bytes], ...]
"""A body's top-level fields (some of them), as (name, JSON text): a key for a TextMemo."""


def read_fields(texts: FieldTexts) -> dict[str, Any]:
    """The fields' values (a ``read`` for a TextMemo keyed by FieldTexts)."""
    return {key: loads(text) for key, text in texts}


class TextMemo(Generic[K, T]):
    """``parse(read(text))`` for the most recently used texts, up to ``budget`` bytes (texts
    and parses, :func:`lego_rl.proxy.budgets.size_of`): JSON texts (``read``:
    :func:`lego_rl.proxy.jsonio.loads`), or any hashable of them with its own ``read``.

    Exact by construction: a parse depends on the value alone, and the same text is the same
    value. Parses are shared between the requests that reuse them: nobody may mutate them. A
    parse that raises is not kept, nor what a request that fails put (see
    :func:`~lego_rl.proxy.budgets.tentative`). The latest text is compared first: a harness's
    system prompt and tool list (~70 KB for Claude Code) are equal call after call, and
    comparing them costs a tenth of hashing them."""

    @overload
    def __init__(
        self: TextMemo[bytes, T], parse: Callable[[Any], T], name: str = ..., budget: int = ...
    ) -> None: ...

    @overload
    def __init__(
        self, parse: Callable[[Any], T], name: str = ..., budget: int = ..., *, read: Callable[[K], Any]
    ) -> None: ...

    def __init__(
        self,
        parse: Callable[[Any], T],
        name: str = "text-memo",
        budget: int = 32 * MiB,
        read: Callable[[Any], Any] = loads,
    ) -> None:
        self.parse, self.read = parse, read
        self.cache: ByteLRU[K, T] = ByteLRU(name, budget)
        self._latest: Entry[K, T] | None = None

    def get(self, text: K) -> T:
        latest = self._latest
        if latest is not None and latest.alive and latest.key == text:
            return latest.value
        found = self.cache.get(text)
        if found is not None:
            self._latest = found
            return found.value
        value = self.parse(self.read(text))
        entry = self.cache.put(text, value, size_of(text) + size_of(value))
        if entry is not None:
            self._latest = entry
        return value
