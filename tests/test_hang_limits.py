"""The suite's hang limits by kind of test (the root ``conftest.py``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

CONTRIB = Path(__file__).resolve().parents[1] / "contrib"


def limit(request: pytest.FixtureRequest) -> object:
    marker = request.node.get_closest_marker("timeout")
    return marker.args[0] if marker else None


@pytest.mark.slow
def test_a_slow_test_without_a_limit_of_its_own_gets_the_slow_limit(request: pytest.FixtureRequest) -> None:
    assert limit(request) == 1800


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_a_slow_test_keeps_a_limit_of_its_own(request: pytest.FixtureRequest) -> None:
    assert limit(request) == 2400


def test_a_unit_test_keeps_the_ini_limit(request: pytest.FixtureRequest) -> None:
    assert limit(request) is None
    assert request.config.getini("timeout") == "600"


@pytest.mark.parametrize("plugin", sorted(p.parent.name for p in CONTRIB.glob("*/tests")))
def test_a_plugin_tested_from_its_own_directory_keeps_the_slow_limit(plugin: str) -> None:
    """Run there, its own pyproject is the ini and the root conftest.py is not loaded."""
    project = tomllib.loads((CONTRIB / plugin / "pyproject.toml").read_text())
    assert project["tool"]["pytest"]["ini_options"]["timeout"] == 1800
    assert any(r.startswith("pytest-timeout") for r in project["project"]["optional-dependencies"]["test"])
