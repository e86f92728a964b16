"""Every red-team attack, by class: the sandbox's network and what it shows, the task's git
history (by name and disguised), the tests and what runs them, the reward file, processes,
resources, and the attacks on verification (configuration, the agent's ``.git`` at test time,
exit status, forged reports, laundering). Registered for the sandbox contracts of the core
(``legorl_register_attacks``)."""

from __future__ import annotations

from typing import Any

from lego_rl import hookimpl
from legorl_std.redteam.attacks import ATTACKS, Attack
from legorl_std.redteam.attacks_git import GIT_ATTACKS
from legorl_std.redteam.attacks_verify import VERIFY_ATTACKS
from legorl_std.redteam.attacks_view import VIEW_ATTACKS

ALL_ATTACKS: tuple[Attack, ...] = (*ATTACKS, *VIEW_ATTACKS, *GIT_ATTACKS, *VERIFY_ATTACKS)
BY_NAME = {a.name: a for a in ALL_ATTACKS}
if len(BY_NAME) != len(ALL_ATTACKS):  # pragma: no cover - a programming error, found at import
    raise ValueError("red-team attack names must be unique")


@hookimpl
def legorl_register_attacks(register: Any) -> None:
    for attack in ALL_ATTACKS:
        register(attack)
