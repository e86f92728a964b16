"""Entry point of legorl-verl: registers the ``verl`` trainer (options only; verl loads on run)."""

from __future__ import annotations

from typing import Any

from lego_rl import hookimpl
from lego_rl.registry import BuildContext
from legorl_verl.options import VerlTrainerOptions


def verl(options: VerlTrainerOptions, ctx: BuildContext) -> Any:
    """verl's RayPPOTrainer (FSDP/Megatron on Ray); each rollout is one lego-rl trial."""
    from legorl_verl.trainer import VerlTrainer

    return VerlTrainer(options, ctx)


def plan_details(options: VerlTrainerOptions, ctx: BuildContext) -> dict[str, Any]:
    """``legorl plan``: the resolved verl config that ``apply`` would launch."""
    from legorl_verl.trainer import VerlTrainer

    assert ctx.spec is not None
    return VerlTrainer(options, ctx).plan_details(ctx.spec)


verl.plan_details = plan_details  # type: ignore[attr-defined]  # the factory offers PlanDetails: mypy allows no attribute set on a function


@hookimpl
def legorl_register_trainer(register: Any) -> None:
    register("verl", verl, options=VerlTrainerOptions)
