"""The one private verl name lego-rl uses: the worker side's rollout class table.

verl 0.9.1's hybrid actor worker builds its rollout adapter with
``verl.workers.rollout.base.get_rollout_class(name, mode)``, which only looks in the module's
``_ROLLOUT_REGISTRY`` dict (the trainer side has a public ``RolloutReplicaRegistry``; this side
has no registration function). An entry is added there, for exactly the verl version read.
tests/test_verl_cpu.py fails if verl changes it.
"""

from __future__ import annotations

from importlib import metadata

VERL_VERSION = "0.9.1"
"""The verl version whose private table this module writes to."""


def register_rollout_class(name: str, fqn: str) -> None:
    """Make ``get_rollout_class(name, "async")`` return the class at ``fqn``."""
    version = metadata.version("verl")
    if version != VERL_VERSION:
        raise RuntimeError(
            f"legorl-verl registers its CPU rollout in verl {VERL_VERSION}'s private "
            f"verl.workers.rollout.base._ROLLOUT_REGISTRY; verl {version} is installed: "
            "re-read verl's get_rollout_class and update legorl_verl/cpu/verl_private.py"
        )
    from verl.workers.rollout import base

    table = getattr(base, "_ROLLOUT_REGISTRY", None)
    if not isinstance(table, dict):
        raise TypeError("verl.workers.rollout.base._ROLLOUT_REGISTRY is gone: update verl_private.py")
    table[(name, "async")] = fqn
