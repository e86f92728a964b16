"""Every conformance contract of the sandbox kind, run on this plugin (one test each)."""

import pytest

pytestmark = pytest.mark.legorl_plugin("sandbox", "docker")


def test_contract(legorl_contract):
    legorl_contract()
