"""Every installed plugin passes its kind's conformance contract."""

import pytest

from lego_rl.testing import installed_plugins, plugin_id

PLUGINS = installed_plugins()


@pytest.mark.parametrize("plugin", PLUGINS, ids=plugin_id)
def test_plugin_conforms(plugin, legorl_conformance):
    legorl_conformance(plugin)


def test_quickstart_kinds_have_installed_plugins():
    kinds = {p.kind for p in PLUGINS}
    for kind in ("tasks", "sandbox", "harness", "dialect", "verifier", "filter",
                 "optimizer", "inference", "trainer", "observer"):
        assert kind in kinds, f"no installed {kind} plugin"
