"""Anti-cheat policies (kind ``anticheat``), each switchable in a spec's ``anticheat:`` list."""

from __future__ import annotations

from typing import Any

from lego_rl import hookimpl
from legorl_std.anticheat import (
    git_history,
    no_network,
    process_reaper,
    reward_guard,
    reward_hacking,
    test_guard,
)

POLICIES = (no_network, git_history, test_guard, reward_guard, process_reaper, reward_hacking)


@hookimpl
def legorl_register_anticheat(register: Any) -> None:
    for module in POLICIES:
        module.register(register)
