"""Conformance contracts: what every plugin of a kind must do, whoever wrote it.

Each kind has named contracts (``harness.structure``, ``harness.solves-task``, ...), the
structural ones first. ``check(plugin, env)`` runs them all; ``run_contract`` runs one. Plugin
authors run the same checks through the pytest plugin (:mod:`lego_rl.testing.plugin`).
"""

from lego_rl.testing.contracts import (  # noqa: F401  (importing registers their contracts)
    anticheat,
    capabilities,
    components,
    dialect,
    dialect_capabilities,
    harness,
    model,
    sandbox,
    sandbox_isolation,
    sandbox_redteam,
    sandbox_verification,
    trainer,
)
from lego_rl.testing.contracts.base import (
    PROTOCOLS,
    Contract,
    ContractEnv,
    ContractError,
    build,
    check,
    conformance_tasks_dir,
    contract,
    contract_named,
    contracts_for,
    example_options,
    run_contract,
)
from lego_rl.testing.contracts.harness import CONFORMANCE_COMMANDS, HARNESS_CONTEXT, scripted_trial

__all__ = [
    "CONFORMANCE_COMMANDS",
    "HARNESS_CONTEXT",
    "PROTOCOLS",
    "Contract",
    "ContractEnv",
    "ContractError",
    "build",
    "check",
    "conformance_tasks_dir",
    "contract",
    "contract_named",
    "contracts_for",
    "example_options",
    "run_contract",
    "scripted_trial",
]
