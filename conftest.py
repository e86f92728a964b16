"""Hang limits by kind of test, for every test directory of the suite.

The ini's ``timeout`` (600 s) bounds unit tests. A ``slow`` test runs real harnesses, sandboxes,
containers or training steps, and beside the rest of the suite on 2 cores it took up to 4x its
time alone (the verl CPU run: 292 s alone, 868 s beside the others, more on the CI machine), so
one without a limit of its own gets ``SLOW_LIMIT``: a hang still fails it, load does not.
"""

from __future__ import annotations

import pytest

SLOW_LIMIT = 1800


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_LIMIT))
