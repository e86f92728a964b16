"""Registers the CPU pieces in verl's registries; imported first by every verl process of a
CPU run (``VERL_USE_EXTERNAL_MODULES=legorl_verl.cpu.register``)."""

from __future__ import annotations

from verl.plugin.platform import PlatformRegistry

from legorl_verl.cpu import PLATFORM, ROLLOUT
from legorl_verl.cpu.platform import CPUPlatform

PlatformRegistry.register(platform=PLATFORM)(CPUPlatform)  # before any verl module asks for its platform


def _replica() -> type:
    from legorl_verl.cpu.replica import CPURolloutReplica

    return CPURolloutReplica


def register() -> None:
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    from legorl_verl.cpu.verl_private import register_rollout_class

    RolloutReplicaRegistry.register(ROLLOUT, _replica)
    register_rollout_class(ROLLOUT, "legorl_verl.cpu.adapter.CPURolloutAdapter")
    _register_engine()


def _register_engine() -> None:
    """verl's FSDP engine, which registers for cuda and npu, under the cpu device too (with
    routing replay: :mod:`legorl_verl.cpu.engine`)."""
    from verl.workers.engine import EngineRegistry

    from legorl_verl.cpu.engine import ReplayingFSDPEngine

    EngineRegistry.register(model_type="language_model", backend=["fsdp", "fsdp2"], device="cpu")(
        ReplayingFSDPEngine
    )


register()
