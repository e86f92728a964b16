"""Every installed first-party plugin passes each of its kind's conformance contracts
(third-party distributions, such as contrib/legorl-opencode, run them in their own tests)."""

import pytest

from lego_rl.catalog import NEEDS_GPU, is_first_party
from lego_rl.testing import contract_id, installed_contracts, installed_plugins

MODEL_FREE_HARNESSES = {"scripted"}
"""Test doubles that run fixed commands and never call the model: the contracts that drive a
harness with the scripted policy do not apply to them."""

CASES = [
    (plugin, contract)
    for plugin, contract in installed_contracts()
    if is_first_party(plugin.distribution)
    and not (plugin.kind == "harness" and plugin.name in MODEL_FREE_HARNESSES
            and contract.name not in ("structure", "preflight"))
    # GPU engines (vLLM, verl) need their server here: tests/test_vllm_plugin.py and
    # tests/test_verl_plugin.py cover them on CPU through stand-ins of the same shapes
    and not (plugin.distribution in NEEDS_GPU and contract.name not in ("structure", "preflight"))
]


@pytest.mark.parametrize("case", CASES, ids=contract_id)
def test_plugin_conforms(case, legorl_conformance):
    plugin, contract = case
    legorl_conformance(plugin, contract)


def test_quickstart_kinds_have_installed_plugins():
    kinds = {p.kind for p in installed_plugins()}
    for kind in ("tasks", "sandbox", "harness", "dialect", "verifier", "filter",
                 "optimizer", "inference", "trainer", "observer"):
        assert kind in kinds, f"no installed {kind} plugin"
