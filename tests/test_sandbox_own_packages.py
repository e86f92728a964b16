"""What a local sandbox covers of lego-rl's own installs: read once, re-read when installs change."""

from __future__ import annotations

import sys
from pathlib import Path

import legorl_std.sandbox.view as view
import pytest


def _install_plugin(site: Path, name: str) -> Path:
    """A distribution with a ``lego_rl`` entry point, installed into ``site`` as pip would."""
    package = site / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    meta = site / f"{name}-1.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (meta / "entry_points.txt").write_text(f"[lego_rl]\n{name} = {name}\n")
    (meta / "RECORD").write_text(f"{name}/__init__.py,,\n{meta.name}/METADATA,,\n")
    return package


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    return tmp_path


def test_own_packages_are_read_once_while_nothing_is_installed(site: Path, monkeypatch: pytest.MonkeyPatch):
    _install_plugin(site, "legorl_cached_probe")
    first = view.own_packages([site])
    reads: list[int] = []
    real = view._own_distributions
    monkeypatch.setattr(view, "_own_distributions", lambda: reads.append(1) or real())
    assert view.own_packages([site]) == first
    assert reads == []
    assert site / "legorl_cached_probe" in first


def test_a_distribution_installed_later_is_covered_from_the_next_call(site: Path):
    _install_plugin(site, "legorl_first_probe")
    before = view.own_packages([site])
    later = _install_plugin(site, "legorl_later_probe")
    after = view.own_packages([site])
    assert later not in before
    assert later in after
    assert site / "legorl_later_probe-1.0.dist-info" in after
