"""Hang limits by kind of test, and the order modules start in, for every test directory of the suite.

The ini's ``timeout`` (600 s) bounds unit tests. A ``slow`` test runs real harnesses, sandboxes,
containers or training steps, and beside the rest of the suite on 2 cores it took up to 4x its
time alone (the verl CPU run, before its actor computed in fp32: 9 minutes alone, 34 beside
the others), so one without a limit of its own gets ``SLOW_LIMIT``: a hang still fails it, load
does not.

Order: ``make test`` hands whole modules to the workers (``--dist loadfile``) in collection
order (``--no-loadscope-reorder``). A module started last runs on after the rest has finished,
and its time adds to the suite's; started first, it overlaps the rest. So the longest start
first: ``slow(minutes=N)`` on a test gives its module's minutes in the suite's run (its fixtures'
setup included), a scheduling weight only, never a bound. The other modules follow, the most
tests first (pytest-xdist's own order).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Protocol, TypeVar

import pytest

SLOW_LIMIT = 1800


class Marked(Protocol):
    """What the order reads of a collected test."""

    @property
    def nodeid(self) -> str: ...

    def iter_markers(self, name: str | None = None) -> Iterable[pytest.Mark]: ...


M = TypeVar("M", bound=Marked)


def module_of(item: Marked) -> str:
    return item.nodeid.split("::", 1)[0]


def longest_first(items: list[M]) -> list[M]:
    """The items, their modules by declared minutes then number of tests, each module's in order."""
    minutes: dict[str, float] = {}
    tests = Counter(module_of(item) for item in items)
    for item in items:
        declared = (float(mark.kwargs.get("minutes", 0)) for mark in item.iter_markers("slow"))
        minutes[module_of(item)] = max(minutes.get(module_of(item), 0.0), *declared, 0.0)
    return sorted(items, key=lambda item: (-minutes[module_of(item)], -tests[module_of(item)]))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_LIMIT))
    items[:] = longest_first(items)
