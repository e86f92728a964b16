"""CONTRIBUTING.md's layout matches the tree: every path it names exists, and every top-level
module and package of the core is named there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def layout() -> tuple[list[str], list[str]]:
    """(top-level entries, entries under lego_rl/) the layout block names."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    top, core = [], []
    for line in block.splitlines():
        if match := re.match(r"^(\s*)([\w./-]+(?:/|\.py))\s", line + " "):
            (core if match.group(1) else top).append(match.group(2))
    return top, core


def test_every_path_the_layout_names_exists() -> None:
    top, core = layout()
    assert "lego_rl/" in top and core
    for name in top:
        assert (ROOT / name).exists(), f"CONTRIBUTING.md's layout names {name}, which is not in the tree"
    for name in core:
        assert (ROOT / "lego_rl" / name).exists(), f"CONTRIBUTING.md's layout names lego_rl/{name}, which is not there"


def test_every_core_module_and_package_is_in_the_layout() -> None:
    _, core = layout()
    named = {n.rstrip("/") for n in core}
    here = {
        p.name
        for p in (ROOT / "lego_rl").iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and not p.name.startswith("__"))
    }
    missing = sorted(here - named)
    assert not missing, f"CONTRIBUTING.md's layout does not say what these are: {missing}"
