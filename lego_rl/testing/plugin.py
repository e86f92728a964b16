"""pytest plugin (entry point ``pytest11``): the conformance kit for plugin authors.

In a plugin's test suite::

    import pytest
    from lego_rl.testing import installed_plugins

    @pytest.mark.parametrize("plugin", installed_plugins(dist="my-dist"), ids=str)
    def test_conformance(plugin, legorl_conformance):
        legorl_conformance(plugin)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lego_rl.registry import PluginInfo, Registry, default_registry
from lego_rl.testing.contracts import ContractEnv, check


@pytest.fixture
def legorl_registry() -> Registry:
    """The registry of installed plugins (entry points, honouring LEGORL_LOAD_PLUGINS)."""
    return default_registry()


@pytest.fixture
def legorl_conformance(
    tmp_path: Path, legorl_registry: Registry
) -> Callable[[PluginInfo], None]:
    """Run a plugin's kind contract: ``legorl_conformance(plugin_info)``."""

    def run(plugin: PluginInfo) -> None:
        check(plugin, ContractEnv(tmp=tmp_path, registry=legorl_registry))

    return run
