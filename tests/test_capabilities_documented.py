"""Every optional capability in lego_rl.kinds is a runtime-checkable Protocol, listed where plugin
authors look (CONTRIBUTING.md's capability tables) and shown in the plugin template."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from lego_rl import kinds
from lego_rl.testing.contracts import PROTOCOLS

ROOT = Path(__file__).resolve().parents[1]
EXCHANGED = {"Sandbox", "ChangedPath", "StreamFormatter"}
"""Protocols of what plugins hand back (a started sandbox, a change, a stream), not capabilities."""
CAPABILITIES = sorted(
    name
    for name, member in vars(kinds).items()
    if inspect.isclass(member)
    and getattr(member, "_is_protocol", False)
    and member.__module__.startswith(kinds.__name__ + ".")
    and member not in PROTOCOLS.values()
    and name not in EXCHANGED
)


def test_the_capabilities_are_found() -> None:
    assert {"PristineVerify", "StreamingDialect", "LoadsWeights", "OwnsRollout"} <= set(CAPABILITIES)


@pytest.mark.parametrize("name", CAPABILITIES)
def test_a_capability_is_checkable_documented_and_in_the_template(name: str) -> None:
    assert getattr(vars(kinds)[name], "_is_runtime_protocol", False), f"{name} needs @runtime_checkable"
    assert f"`{name}`" in (ROOT / "CONTRIBUTING.md").read_text(), f"CONTRIBUTING.md's capability tables lack {name}"
    template = "".join(p.read_text() for p in sorted((ROOT / "contrib/plugin-template/kinds").glob("*.py")))
    assert name in template, f"no template in contrib/plugin-template/kinds shows {name}"
