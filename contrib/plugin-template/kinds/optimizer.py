"""The {{name}} optimizer: group-relative advantages, a policy-gradient loss left to write."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from lego_rl import hookimpl
from lego_rl.data import TrialResult
from lego_rl.registry import BuildContext


class {{Class}}Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scale_by_std: bool = False
    """Divide by the group's reward standard deviation (GRPO) instead of only centring it."""


class {{Class}}:
    """Advantage of a trial: its reward minus its group's mean (optionally over the std)."""

    def __init__(self, options: {{Class}}Options, ctx: BuildContext) -> None:
        self.options = options

    def advantages(self, group: list[TrialResult]) -> list[float]:
        rewards = [r.reward for r in group]
        mean = sum(rewards) / len(rewards)
        centred = [r - mean for r in rewards]
        if not self.options.scale_by_std:
            return centred
        std = (sum(c * c for c in centred) / len(centred)) ** 0.5
        return [c / std if std > 0 else 0.0 for c in centred]

    def loss(self, batch: Any) -> tuple[Any, dict[str, float]]:
        """TODO: the loss over the trainer's token batch (see your trainer's batch type)."""
        raise NotImplementedError("{{name}}: loss() is not written yet")

    # Optional capability (lego_rl.kinds): UsesReference, the trainer keeps a frozen
    # reference model and puts its log-probs in the batch while this says so.
    # @property
    # def needs_reference(self) -> bool:
    #     return self.options.kl_coef > 0


@hookimpl
def legorl_register_optimizer(register) -> None:
    register("{{name}}", {{Class}}, options={{Class}}Options)
