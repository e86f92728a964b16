"""One copy of a tool list that many requests repeat.

Every request of every session re-sends the harness's tool list (Claude Code: 20+ tools, ~300
nested dicts and lists once parsed). Kept per session (for the next request to compare), the
copies would be the largest part of what the garbage collector walks on a full collection:
64 sessions, ~18k containers. Requests whose tools equal a recent list get that list instead,
and their own copy dies young.
"""

from __future__ import annotations

import threading
from typing import Any

from lego_rl.proxy.budgets import MiB, on_failure, size_of, track

Tools = list[dict[str, Any]]


class SharedTools:
    """The most recently seen distinct tool lists, up to ``budget`` bytes
    (:func:`~lego_rl.proxy.budgets.size_of`; a list a failed request brought is taken back)."""

    name = "shared-tools"

    def __init__(self, budget: int = 16 * MiB):
        self.budget = budget
        self.recent: list[tuple[Tools, int]] = []
        """(list, its bytes), the most recent first."""
        self.lock = threading.Lock()
        track(self)

    @property
    def nbytes(self) -> int:
        return sum(n for _, n in self.recent)

    def forget(self, scope: str) -> None:
        """Tool lists are shared by every session: nothing is a session's own."""

    def share(self, tools: Tools) -> Tools:
        """A recent list equal to ``tools``, else ``tools`` itself; either is now the most
        recent. The lists are shared: nobody may mutate them."""
        if not tools:
            return tools
        recent = self.recent  # replaced, never mutated: a snapshot without the lock
        found = next((kept for kept in recent if kept[0] is tools or kept[0] == tools), None)
        new = found is None
        if found is None:
            found = (tools, size_of(tools))
        with self.lock:
            before = self.recent
            kept, total = [found], found[1]
            for other in before:
                if other[0] is not found[0] and total + other[1] <= self.budget:
                    kept.append(other)
                    total += other[1]
            self.recent = kept if found[1] <= self.budget else kept[1:]
        if new:
            on_failure(lambda: self._take_back(self.recent, before))
        return found[0]

    def _take_back(self, after: list[tuple[Tools, int]], before: list[tuple[Tools, int]]) -> None:
        """The lists as they were before a failed request's, if nobody shared one since."""
        with self.lock:
            if self.recent is after:
                self.recent = before
