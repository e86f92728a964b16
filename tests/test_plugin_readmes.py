"""Every plugin distribution of this repository (plugins/, contrib/) has a README that names
each plugin it registers, under its kind, as `legorl plugins` lists it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from lego_rl.registry import default_registry

REPO = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = sorted(
    p.parent for p in [*REPO.glob("plugins/*/pyproject.toml"), *REPO.glob("contrib/legorl-*/pyproject.toml")]
)


def dist_name(path: Path) -> str:
    return tomllib.loads((path / "pyproject.toml").read_text())["project"]["name"]


@pytest.mark.parametrize("path", DISTRIBUTIONS, ids=lambda p: p.name)
def test_the_readme_names_what_the_distribution_registers(path: Path) -> None:
    readme = path / "README.md"
    assert readme.is_file(), f"{path.relative_to(REPO)} has no README.md"
    text = readme.read_text()
    registered = [p for p in default_registry().all() if p.distribution == dist_name(path)]
    assert registered, f"{dist_name(path)} registers nothing (not installed?)"
    for plugin in registered:
        row = re.compile(rf"^\|\s*{plugin.kind}\s*\|\s*`{re.escape(plugin.name)}`\s*\|", re.M)
        named = row.search(text) or re.search(rf"`{re.escape(plugin.name)}`", text)
        assert named, f"{readme.relative_to(REPO)} does not name its {plugin.kind} `{plugin.name}`"
    assert "## What it needs" in text or "needs" in text.lower(), f"{readme.relative_to(REPO)}: say what it needs"
