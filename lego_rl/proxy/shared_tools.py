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

Tools = list[dict[str, Any]]


class SharedTools:
    """The ``size`` most recently seen distinct tool lists."""

    def __init__(self, size: int = 16):
        self.size = size
        self.recent: list[Tools] = []
        self.lock = threading.Lock()

    def share(self, tools: Tools) -> Tools:
        """A recent list equal to ``tools``, else ``tools`` itself; either is now the most
        recent. The lists are shared: nobody may mutate them."""
        if not tools:
            return tools
        recent = self.recent  # replaced, never mutated: a snapshot without the lock
        found = next((known for known in recent if known is tools or known == tools), tools)
        with self.lock:
            rest = [known for known in self.recent if known is not found]
            self.recent = [found, *rest][: self.size]
        return found
