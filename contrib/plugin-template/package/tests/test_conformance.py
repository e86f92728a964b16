"""Every conformance contract of the {{kind}} kind, run on this plugin (one test each)."""

import pytest

pytestmark = pytest.mark.legorl_plugin("{{kind}}", "{{name}}")


def test_contract(legorl_contract):
    legorl_contract()
