"""A private asyncio loop on its own thread, so synchronous code can drive Harbor's async API."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any


class LoopThread:
    """Runs coroutines on one daemon thread's event loop; started on first use."""

    def __init__(self, name: str = "legorl-harbor") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name=self._name, daemon=True).start()
                self._loop = loop
            return self._loop

    def run[T](self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result (its exception is raised here)."""
        return asyncio.run_coroutine_threadsafe(coro, self._running()).result()

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
