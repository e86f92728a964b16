"""Byte budgets for the proxy's caches: an honest size per entry, least recently used out past a
budget, nothing kept from a request that fails, a session's entries dropped when it closes.

A harness re-sends its whole history on every call, and the proxy's caches (message memos, the
memos of system prompts, tools and settings, the shared tool lists, the tokenizer's prefix and
chunk caches) keep what it sent for the next call. Bounded by entry count, a cache of ten
entries could hold ten 10 MB bodies and the ids of every piece of them. Here each entry carries
the bytes it keeps alive (:func:`size_of`: every object it refers to, as CPython lays it out,
an object shared by two entries counted in each: estimates err high), and a cache drops its
least recently used entries past its budget (:class:`ByteLRU`).

A request is prepared inside :func:`tentative`: whatever it put in any cache is taken back when
it fails (a prompt over the context length, a body refused with a 400), so a refused request
leaves nothing behind. An entry may belong to a scope (a proxy session): :func:`forget_scope`
drops the scope's entries when the session closes. :func:`cache_bytes` reports every live cache
of the process (``legorl bench proxy``, the run's step metrics).
"""

from __future__ import annotations

import contextvars
import dataclasses
import re
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar

from lego_rl.token_ids import TokenIds

MiB = 1 << 20
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_ATOMIC = (str, bytes, bytearray, int, float, complex, bool, type(None))
INT_BYTES = 32
"""An int object past the small-int cache, as pymalloc stores it (28 bytes rounded up)."""


def size_of(value: object) -> int:
    """The bytes ``value`` keeps alive: itself and every object it refers to (containers,
    dataclass fields, what a memoryview views, a TokenIds' bytes), each object once."""
    seen: set[int] = set()
    stack = [value]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, _ATOMIC):
            continue
        if isinstance(obj, memoryview):
            stack.append(obj.obj)
        elif isinstance(obj, TokenIds):
            total += obj.nbytes - sys.getsizeof(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            stack.extend(getattr(obj, f.name) for f in dataclasses.fields(obj))
            if hasattr(obj, "__dict__"):
                total += sys.getsizeof(obj.__dict__)
    return total


def ids_size(ids: tuple[int, ...]) -> int:
    """:func:`size_of` a tuple of token ids without visiting them: each counted a whole int
    object (small ids are shared, so this errs high)."""
    return sys.getsizeof(ids) + INT_BYTES * len(ids)


# -------------------------------------------------------------- tentative requests

_UNDO: contextvars.ContextVar[list[Callable[[], object]] | None] = contextvars.ContextVar(
    "legorl_cache_undo", default=None
)


@contextmanager
def tentative() -> Iterator[None]:
    """What the block puts in any cache (in this thread) is taken back if the block raises."""
    undo: list[Callable[[], object]] = []
    token = _UNDO.set(undo)
    try:
        yield
    except BaseException:
        for take_back in reversed(undo):
            take_back()
        raise
    finally:
        _UNDO.reset(token)


def on_failure(take_back: Callable[[], object]) -> None:
    """Run ``take_back`` if the enclosing :func:`tentative` block fails (none: nothing)."""
    undo = _UNDO.get()
    if undo is not None:
        undo.append(take_back)


# -------------------------------------------------------------- caches


class Budgeted(Protocol):
    """A cache that :func:`cache_bytes` reports."""

    @property
    def name(self) -> str: ...

    @property
    def budget(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    def forget(self, scope: str) -> None:
        """Drop the entries of ``scope`` (a closed session)."""
        ...


_LIVE: weakref.WeakSet[Budgeted] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


def track(cache: Budgeted) -> None:
    """Report ``cache`` in :func:`cache_bytes` and let :func:`forget_scope` reach it."""
    with _LIVE_LOCK:
        _LIVE.add(cache)


def _live() -> list[Budgeted]:
    with _LIVE_LOCK:
        return list(_LIVE)


def cache_bytes() -> dict[str, int]:
    """Bytes held by each live cache of this process, by name (caches of one name summed)."""
    out: dict[str, int] = {}
    for cache in _live():
        out[cache.name] = out.get(cache.name, 0) + cache.nbytes
    return dict(sorted(out.items()))


def cache_metrics() -> dict[str, float]:
    """:func:`cache_bytes` as step metrics: ``proxy_cache_bytes`` (all of them) and
    ``proxy_cache_<name>_bytes`` for each."""
    sizes = cache_bytes()
    out = {"proxy_cache_bytes": float(sum(sizes.values()))}
    for name, n in sizes.items():
        out[f"proxy_cache_{re.sub(r'[^a-z0-9]+', '_', name.lower())}_bytes"] = float(n)
    return out


def forget_scope(scope: str) -> None:
    """Drop every cache's entries of ``scope`` (a proxy session that closed)."""
    for cache in _live():
        cache.forget(scope)


class Entry(Generic[K, V]):
    """One cached value with the bytes it keeps; ``alive`` until it leaves its cache."""

    __slots__ = ("alive", "key", "nbytes", "scope", "value")

    def __init__(self, key: K, value: V, nbytes: int, scope: str | None) -> None:
        self.key, self.value, self.nbytes, self.scope = key, value, nbytes, scope
        self.alive = True


class ByteLRU(Generic[K, V]):
    """Entries by key, least recently used first out past ``budget`` bytes; an entry larger
    than the whole budget is not kept. Thread-safe."""

    def __init__(self, name: str, budget: int) -> None:
        self.name, self.budget = name, budget
        self.entries: OrderedDict[K, Entry[K, V]] = OrderedDict()
        self.scopes: dict[str, dict[K, None]] = {}
        """Keys of each scope, oldest first."""
        self.nbytes = 0
        self.lock = threading.Lock()
        track(self)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, key: object) -> bool:
        return key in self.entries

    def get(self, key: K) -> Entry[K, V] | None:
        """The entry of ``key`` (now the most recently used), or None."""
        with self.lock:
            entry = self.entries.get(key)
            if entry is not None:
                self.entries.move_to_end(key)
            return entry

    def put(self, key: K, value: V, nbytes: int, scope: str | None = None) -> Entry[K, V] | None:
        """Keep ``value`` under ``key`` (replacing what it had), evicting past the budget;
        None when it alone is over the budget. Taken back if the request fails."""
        if nbytes > self.budget:
            return None
        entry = Entry(key, value, nbytes, scope)
        with self.lock:
            self._drop(key)
            self.entries[key] = entry
            self.nbytes += nbytes
            if scope is not None:
                self.scopes.setdefault(scope, {})[key] = None
            while self.nbytes > self.budget:
                self._drop(next(iter(self.entries)))
        on_failure(lambda: self._take_back(entry))
        return entry

    def pop(self, key: K) -> None:
        with self.lock:
            self._drop(key)

    def discard(self, entry: Entry[K, V]) -> None:
        """Drop ``entry`` if it is still the one held under its key; kept again if the request
        fails (and its key is still free)."""
        if self._take_back(entry):
            on_failure(lambda: self._restore(entry))

    def _take_back(self, entry: Entry[K, V]) -> bool:
        with self.lock:
            if self.entries.get(entry.key) is not entry:
                return False
            self._drop(entry.key)
            return True

    def _restore(self, entry: Entry[K, V]) -> None:
        with self.lock:
            if entry.key in self.entries or self.nbytes + entry.nbytes > self.budget:
                return
            self.entries[entry.key] = entry
            self.nbytes += entry.nbytes
            if entry.scope is not None:
                self.scopes.setdefault(entry.scope, {})[entry.key] = None
            entry.alive = True

    def scoped(self, scope: str) -> list[Entry[K, V]]:
        """The entries of ``scope``, oldest first."""
        with self.lock:
            return [self.entries[k] for k in self.scopes.get(scope, ())]

    def forget(self, scope: str) -> None:
        with self.lock:
            for key in list(self.scopes.get(scope, ())):
                self._drop(key)

    def clear(self) -> None:
        with self.lock:
            for key in list(self.entries):
                self._drop(key)

    def _drop(self, key: K) -> None:
        entry = self.entries.pop(key, None)
        if entry is None:
            return
        entry.alive = False
        self.nbytes -= entry.nbytes
        if entry.scope is not None:
            keys = self.scopes[entry.scope]
            del keys[key]
            if not keys:
                del self.scopes[entry.scope]
