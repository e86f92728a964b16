"""Entry point of legorl-std: each kind's registration lives beside its implementation."""

from legorl_std.anticheat import legorl_register_anticheat
from legorl_std.dialects import legorl_register_dialect
from legorl_std.filters import legorl_register_filter
from legorl_std.harness.scripted import legorl_register_harness
from legorl_std.observers.store import legorl_register_observer
from legorl_std.redteam.catalog import legorl_register_attacks
from legorl_std.redteam.command import legorl_register_commands
from legorl_std.sandbox.bench import legorl_register_benchmarks
from legorl_std.sandbox.local import legorl_register_sandbox
from legorl_std.tasks.bugfix_source import legorl_register_bugfix_tasks as legorl_register_bugfix_tasks
from legorl_std.tasks.harbor_dir import legorl_register_tasks
from legorl_std.verifier.test_script import legorl_register_verifier

__all__ = [
    "legorl_register_anticheat",
    "legorl_register_attacks",
    "legorl_register_benchmarks",
    "legorl_register_commands",
    "legorl_register_dialect",
    "legorl_register_filter",
    "legorl_register_harness",
    "legorl_register_observer",
    "legorl_register_sandbox",
    "legorl_register_tasks",
    "legorl_register_verifier",
]
