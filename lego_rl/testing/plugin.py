"""pytest plugin (entry point ``pytest11``): the conformance kit for plugin authors.

Mark a test module with the plugin under test; every test that takes ``legorl_contract``
runs once per contract of that plugin's kind, each test named after its contract::

    import pytest

    pytestmark = pytest.mark.legorl_plugin("harness", "my-agent")

    def test_contract(legorl_contract):
        legorl_contract()

``legorl_conformance(plugin_info)`` runs all contracts of an already looked-up plugin in one test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from lego_rl.registry import PluginInfo, Registry, default_registry
from lego_rl.testing.contracts import Contract, ContractEnv, ContractError, check, contracts_for, run_contract

MARKER = "legorl_plugin"


@dataclass(frozen=True)
class ContractCase:
    """One contract of one plugin, as a test parameter."""

    kind: str
    name: str
    contract: Contract

    @property
    def id(self) -> str:
        return f"{self.name}:{self.contract.id}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(kind, name): the installed lego-rl plugin whose contracts the tests taking "
        "the legorl_contract fixture run, one test per contract",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "legorl_contract" not in metafunc.fixturenames:
        return
    marks = list(metafunc.definition.iter_markers(MARKER))
    if not marks:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid}: a test taking legorl_contract needs "
            f"@pytest.mark.{MARKER}(kind, name) on it or its module (pytestmark = ...)"
        )
    cases = []
    for mark in marks:
        if len(mark.args) != 2:
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: use @pytest.mark.{MARKER}(kind, name)")
        kind, name = mark.args
        try:
            cases += [ContractCase(kind, name, c) for c in contracts_for(kind)]
        except KeyError as exc:
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: {exc.args[0]}") from None
    metafunc.parametrize("legorl_contract", cases, ids=[c.id for c in cases], indirect=True)


@pytest.fixture
def legorl_registry() -> Registry:
    """The registry of installed plugins (entry points, honouring LEGORL_LOAD_PLUGINS)."""
    return default_registry()


@pytest.fixture
def legorl_contract(
    request: pytest.FixtureRequest, tmp_path: Path, legorl_registry: Registry
) -> Callable[[], None]:
    """Runs this test's contract on the marked plugin: ``legorl_contract()``."""
    case: ContractCase = request.param
    if case.name not in legorl_registry.names(case.kind):
        pytest.fail(
            f"{case.kind} plugin {case.name!r} is not installed: install the distribution that "
            "registers it (`pip install -e .`; entry point group `lego_rl`) and check "
            "`legorl plugins`",
            pytrace=False,
        )
    plugin = legorl_registry.get(case.kind, case.name)

    def run() -> None:
        _failing_cleanly(lambda: run_contract(plugin, case.contract, ContractEnv(tmp_path, legorl_registry)))

    return run


@pytest.fixture
def legorl_conformance(tmp_path: Path, legorl_registry: Registry) -> Callable[..., None]:
    """Run a plugin's contracts: ``legorl_conformance(plugin_info)`` (all) or with ``contract``."""

    def run(plugin: PluginInfo, contract: Contract | None = None) -> None:
        env = ContractEnv(tmp=tmp_path, registry=legorl_registry)
        if contract is None:
            _failing_cleanly(lambda: check(plugin, env))
        else:
            _failing_cleanly(lambda: run_contract(plugin, contract, env))

    return run


def _failing_cleanly(call: Callable[[], None]) -> None:
    """A breach fails the test with the contract's message, not a traceback into the kit."""
    try:
        call()
    except ContractError as exc:
        message = str(exc)
    else:
        return
    pytest.fail(message, pytrace=False)
