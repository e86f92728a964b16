"""The conformance kit: contracts every plugin of a kind must pass, and a pytest plugin."""

from __future__ import annotations

from lego_rl.registry import PluginInfo, default_registry
from lego_rl.testing.contracts import Contract, contracts_for


def installed_plugins(kind: str | None = None, dist: str | None = None) -> list[PluginInfo]:
    """Installed plugins to parametrize a conformance test over (ids: use ``plugin_id``)."""
    return [
        p
        for p in default_registry().all()
        if (kind is None or p.kind == kind) and (dist is None or p.distribution == dist)
    ]


def plugin_id(plugin: PluginInfo) -> str:
    return f"{plugin.kind}:{plugin.name}"


def installed_contracts(kind: str | None = None, dist: str | None = None) -> list[tuple[PluginInfo, Contract]]:
    """Every (plugin, contract) pair of the installed plugins, to parametrize one test per contract."""
    return [(p, c) for p in installed_plugins(kind, dist) for c in contracts_for(p.kind)]


def contract_id(case: tuple[PluginInfo, Contract]) -> str:
    plugin, contract = case
    return f"{plugin.name}:{contract.id}"
