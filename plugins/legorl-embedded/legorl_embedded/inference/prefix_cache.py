"""Prompts prefilled recently, kept so that a prompt sharing a prefix with one of them
prefills only the rest.

Agent harnesses send the same long system prompt and tool list with every call of every
trial, and each call of a session extends the previous one; on a CPU, prefilling those
~1k shared tokens again is most of a call's prefill. An entry holds one prompt's ids, its
per-layer keys and values and its prompt routing, for one policy version (a weight update
empties the cache). Entries are evicted least recently used first, by size in bytes.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

from lego_rl.proxy.budgets import track

MIN_SHARED = 32
"""Shorter common prefixes are not worth a lookup's copies: the prompt is prefilled whole."""


@dataclass(frozen=True)
class Prefilled:
    """One prefilled prompt: ids, per-layer (keys, values) ``(1, heads, tokens, dim)``, routing."""

    ids: torch.Tensor
    layers: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    routing: torch.Tensor | None
    """``(tokens, layers, k)`` router indices of the prompt; None for a dense model."""

    @property
    def nbytes(self) -> int:
        tensors = [self.ids, *(t for kv in self.layers for t in kv)]
        return sum(t.numel() * t.element_size() for t in tensors)


class PrefixCache:
    """The most recently prefilled prompts of one model, up to ``capacity_bytes``; reported
    with the proxy's caches (:func:`lego_rl.proxy.budgets.cache_bytes`). Its entries belong to
    no session: every session's calls share their system prompt's keys and values."""

    name = "inference.prefixes"

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self._entries: OrderedDict[int, Prefilled] = OrderedDict()
        self._bytes = 0
        self._next = 0
        self.version: int | None = None
        self.stats = {"lookups": 0, "hits": 0, "reused_tokens": 0, "prompt_tokens": 0}
        """Lookups, hits, prompt tokens served from the cache and prompt tokens looked up."""
        track(self)

    @property
    def budget(self) -> int:
        return self.capacity_bytes

    @property
    def nbytes(self) -> int:
        """Bytes of the kept prompts' ids, keys, values and routing."""
        return self._bytes

    def forget(self, scope: str) -> None:
        """Nothing here is one session's own."""

    def __len__(self) -> int:
        return len(self._entries)

    def longest(self, prompt: torch.Tensor, version: int) -> tuple[int, Prefilled | None]:
        """The entry sharing the longest prefix with ``prompt`` (1-D ids) and that length,
        at most ``len(prompt) - 1`` (the last token is always computed); (0, None) if no entry
        of ``version`` shares at least :data:`MIN_SHARED` tokens."""
        self._at(version)
        self.stats["lookups"] += 1
        self.stats["prompt_tokens"] += len(prompt)
        best, found = 0, None
        for key, entry in self._entries.items():
            shared = _common_prefix(entry.ids, prompt)
            if shared > best:
                best, found = shared, key
        best = min(best, len(prompt) - 1)
        if found is None or best < MIN_SHARED:
            return 0, None
        self._entries.move_to_end(found)
        self.stats["hits"] += 1
        self.stats["reused_tokens"] += best
        return best, self._entries[found]

    def add(self, entry: Prefilled, version: int) -> None:
        """Keep ``entry`` (prefilled under ``version``), evicting the oldest beyond capacity."""
        self._at(version)
        if entry.nbytes > self.capacity_bytes:
            return
        self._entries[self._next] = entry
        self._next += 1
        self._bytes += entry.nbytes
        while self._bytes > self.capacity_bytes:
            _, old = self._entries.popitem(last=False)
            self._bytes -= old.nbytes

    def _at(self, version: int) -> None:
        """Forget every entry of another policy version."""
        if version != self.version:
            self._entries.clear()
            self._bytes = 0
            self.version = version


def _common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    n = min(len(a), len(b))
    differ = torch.nonzero(a[:n] != b[:n])
    return int(differ[0, 0]) if len(differ) else n
