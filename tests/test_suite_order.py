"""The order the suite's modules start in (the root ``conftest.py``, ``make test``)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# by path: under pytest-xdist the module name `conftest` may already be another directory's conftest
_spec = importlib.util.spec_from_file_location("legorl_root_conftest", ROOT / "conftest.py")
assert _spec and _spec.loader
root_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(root_conftest)
longest_first = root_conftest.longest_first


@dataclass
class Item:
    nodeid: str
    marks: list[pytest.Mark] = field(default_factory=list)

    def iter_markers(self, name: str | None = None) -> Iterable[pytest.Mark]:
        return (mark for mark in self.marks if name is None or mark.name == name)


def slow(**kwargs: float) -> pytest.Mark:
    return pytest.mark.slow(**kwargs).mark


def test_modules_with_declared_minutes_start_first_longest_first() -> None:
    items = [
        Item("tests/test_a.py::one"), Item("tests/test_a.py::two"), Item("tests/test_a.py::three"),
        Item("tests/test_b.py::run", [slow(minutes=3)]), Item("tests/test_b.py::unit"),
        Item("tests/test_c.py::one"),
        Item("tests/test_d.py::unit"), Item("tests/test_d.py::run", [slow(), slow(minutes=20)]),
        Item("tests/test_e.py::one", [slow()]), Item("tests/test_e.py::two"),
    ]
    order = [item.nodeid for item in longest_first(items)]
    # d (20 minutes), b (3), then by number of tests: a (3), e (2), c (1); each module's own order kept
    assert order == [
        "tests/test_d.py::unit", "tests/test_d.py::run", "tests/test_b.py::run", "tests/test_b.py::unit",
        "tests/test_a.py::one", "tests/test_a.py::two", "tests/test_a.py::three",
        "tests/test_e.py::one", "tests/test_e.py::two", "tests/test_c.py::one",
    ]


def test_the_longest_module_is_collected_first_whatever_the_order_asked() -> None:
    # unweighted, 3 minutes, 13 minutes (weights far apart, so retuning them keeps this order)
    files = ["tests/test_lint.py", "tests/test_apply_e2e.py", "tests/test_redteam.py"]
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    modules = list(dict.fromkeys(line.split("::", 1)[0] for line in collected.splitlines() if "::" in line))
    assert modules == ["tests/test_redteam.py", "tests/test_apply_e2e.py", "tests/test_lint.py"]


def test_make_test_keeps_the_collection_order() -> None:
    """pytest-xdist reorders modules by number of tests unless told not to."""
    command = re.search(r"^test:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert command and "--dist loadfile" in command.group(1) and "--no-loadscope-reorder" in command.group(1)
