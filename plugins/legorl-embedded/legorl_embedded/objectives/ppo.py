"""The "ppo" optimizer plugin: PPO's clipped surrogate without a value model.

Critic-free: a trial's advantage is its reward minus a baseline from its group, the same
for every token of the trial (all its segments) — the leave-one-out mean of the other
trials (RLOO, unbiased) or the group mean. The loss is PPO-clip per token with dual clip for
negative advantages and truncated IS correction against the inference log-probs
(:func:`~legorl_embedded.objectives.surrogate.clipped_token_loss`). A learned value model (GAE) is not
implemented.
"""

from __future__ import annotations

from torch import Tensor

from lego_rl.data import TrialResult
from lego_rl.registry import BuildContext
from legorl_embedded.objectives.batch import PolicyBatch
from legorl_embedded.objectives.grpo import centred_rewards
from legorl_embedded.objectives.surrogate import clipped_token_loss
from legorl_embedded.options import PPOOptions


class PPO:
    """Critic-free PPO-clip (RLOO or group-mean baseline, dual clip, TIS correction)."""

    def __init__(self, options: PPOOptions, ctx: BuildContext | None = None) -> None:
        self.options = options

    @property
    def needs_reference(self) -> bool:
        return self.options.kl_coef > 0

    def advantages(self, group: list[TrialResult]) -> list[float]:
        """``reward - baseline``; zeros when every reward in the group is the same."""
        centred = centred_rewards(group)
        if centred is None:
            return [0.0] * len(group)
        if self.options.baseline == "leave-one-out":
            n = len(centred)  # r_i - mean(others) = n / (n - 1) * (r_i - mean); n >= 2 here
            return [c * n / (n - 1) for c in centred]
        return centred

    def loss(self, batch: PolicyBatch) -> tuple[Tensor, dict[str, float]]:
        o = self.options
        return clipped_token_loss(
            batch,
            who="ppo",
            clip_low=o.clip,
            clip_high=o.clip,
            correction=o.rollout_correction(),
            aggregation=o.aggregation,
            kl_coef=o.kl_coef,
            dual_clip=o.dual_clip,
        )
