"""Every plugin kind has a registration hook, a Protocol, contracts and a template, and
CONTRIBUTING.md's kinds table says so truly; the generated catalogue names only distributions
of this checkout, each of its plugins installed and run by the conformance test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_conformance import CASES

from lego_rl import hookspecs
from lego_rl.catalog import CATALOG, checkout_distributions
from lego_rl.kinds import KINDS
from lego_rl.registry import default_registry
from lego_rl.testing.contracts import PROTOCOLS, contracts_for

ROOT = Path(__file__).resolve().parents[1]


def kinds_table() -> dict[str, list[str]]:
    """kind -> the cells of its row in CONTRIBUTING.md's "Plugin kinds" table."""
    section = (ROOT / "CONTRIBUTING.md").read_text().split("## Plugin kinds", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| `")]
    return {cells[0].strip().strip("`"): [c.strip() for c in cells] for cells in rows}


def names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_table_has_a_row_per_kind_in_pipeline_order() -> None:
    assert list(kinds_table()) == list(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_a_kind_has_its_hook_protocol_contracts_and_template(kind: str) -> None:
    _, hook, protocol, contracts, template = kinds_table()[kind]
    assert names(hook) == [f"legorl_register_{kind}"] and callable(getattr(hookspecs, names(hook)[0], None))
    assert names(protocol) == [PROTOCOLS[kind].__name__]
    assert names(contracts) == [c.name for c in contracts_for(kind)]
    assert names(contracts)[0] == "structure" and len(names(contracts)) > 1, "a kind needs a behavioural contract"
    path = ROOT / names(template)[0]
    assert path == ROOT / "contrib/plugin-template/kinds" / f"{kind}.py" and path.is_file()
    assert f"def legorl_register_{kind}(" in path.read_text()


def test_the_catalogue_names_only_distributions_of_this_checkout() -> None:
    assert CATALOG, "lego_rl/catalog.json is empty: run legorl schema"
    assert set(CATALOG.values()) <= checkout_distributions()


@pytest.mark.parametrize("entry", sorted(CATALOG), ids=lambda e: f"{e[0]}:{e[1]}")
def test_a_catalogue_entry_is_installed_and_conformance_tested(entry: tuple[str, str]) -> None:
    kind, name = entry
    info = default_registry().get(kind, name)
    assert info.distribution == CATALOG[entry]
    tested = {c.id for p, c in CASES if (p.kind, p.name) == entry}
    assert f"{kind}.structure" in tested, f"tests/test_conformance.py runs no contract of {kind} {name!r}"
