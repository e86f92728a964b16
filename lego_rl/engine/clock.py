"""Time for the rollout pool: real threads and wall time, or a simulated event loop.

The pool never reads time or blocks by itself; it asks its :class:`Clock`. With
:class:`ThreadClock` trials finish on worker threads and ``wait`` blocks on a condition;
with :class:`SimClock` nothing runs concurrently: ``wait`` and ``sleep`` advance simulated
time by firing scheduled events in order, so the same pool code runs a cluster-scale
simulation in milliseconds (``legorl bench schedule``).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    lock: threading.RLock
    """Held around every change of pool state (re-entrant: callbacks run under it)."""

    def now(self) -> float: ...

    def wait(self, done: Callable[[], bool], deadline: float | None = None) -> None:
        """Block (lock held on entry and exit) until ``done()`` or ``deadline`` passes."""
        ...

    def notify(self) -> None:
        """Wake waiters: pool state changed."""
        ...

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass (the simulated trainer's work; a real sleep otherwise)."""
        ...


class ThreadClock:
    """Wall time (``time.time()``, the base of CallRecord timings); waiters sleep on a
    condition that worker threads notify."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)

    def now(self) -> float:
        return time.time()

    def wait(self, done: Callable[[], bool], deadline: float | None = None) -> None:
        while not done():
            left = None if deadline is None else deadline - self.now()
            if left is not None and left <= 0:
                return
            self._changed.wait(timeout=None if left is None else min(left, 5.0))

    def notify(self) -> None:
        with self.lock:
            self._changed.notify_all()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class SimClock:
    """Simulated time: an event heap; ``wait`` and ``sleep`` fire events in time order."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._now = 0.0
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def at(self, when: float, action: Callable[[], None]) -> None:
        """Run ``action`` when simulated time reaches ``when``."""
        heapq.heappush(self._events, (max(when, self._now), next(self._seq), action))

    def wait(self, done: Callable[[], bool], deadline: float | None = None) -> None:
        while not done():
            if not self._events or (deadline is not None and self._events[0][0] > deadline):
                if deadline is None:
                    raise RuntimeError("simulation deadlock: waiting with no event scheduled")
                self._now = max(self._now, deadline)
                return
            self._fire()

    def notify(self) -> None:
        pass

    def sleep(self, seconds: float) -> None:
        until = self._now + seconds
        while self._events and self._events[0][0] <= until:
            self._fire()
        self._now = until

    def _fire(self) -> None:
        when, _, action = heapq.heappop(self._events)
        self._now = when
        action()
