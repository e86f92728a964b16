"""The "grpo" optimizer plugin: group-relative advantages and a clipped token surrogate.

Advantages are ``(reward - group mean) / group std`` (just centred with ``normalize_std:
false``, Dr. GRPO); the loss is :func:`~legorl_embedded.objectives.surrogate.clipped_token_loss`
(clip-higher, truncated IS correction against the inference log-probs, optional k3 KL to
the initial policy), averaged per token or per trial.
"""

from __future__ import annotations

import math

from torch import Tensor

from lego_rl.data import TrialResult
from lego_rl.registry import BuildContext
from legorl_embedded.objectives.batch import PolicyBatch
from legorl_embedded.objectives.surrogate import clipped_token_loss
from legorl_embedded.options import GRPOOptions


def centred_rewards(group: list[TrialResult]) -> list[float] | None:
    """``reward - group mean`` per trial; None when every reward is the same (no signal)."""
    rewards = [r.reward for r in group]
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    if all(abs(r - mean) < 1e-9 for r in rewards):
        return None
    return [r - mean for r in rewards]


class GRPO:
    """Group-relative policy optimisation (clip-higher, optional Dr. GRPO, TIS correction)."""

    def __init__(self, options: GRPOOptions, ctx: BuildContext | None = None) -> None:
        self.options = options

    @property
    def needs_reference(self) -> bool:
        """Whether :meth:`loss` needs ``ref_logprobs`` (a frozen copy of the initial policy)."""
        return self.options.kl_coef > 0

    def advantages(self, group: list[TrialResult]) -> list[float]:
        """(reward - group mean), divided by the group std unless Dr. GRPO; zeros when all agree."""
        centred = centred_rewards(group)
        if centred is None:
            return [0.0] * len(group)
        if not self.options.normalize_std:
            return centred
        std = math.sqrt(sum(c * c for c in centred) / (len(centred) - 1))
        return [c / (std + 1e-6) for c in centred]

    def loss(self, batch: PolicyBatch) -> tuple[Tensor, dict[str, float]]:
        o = self.options
        return clipped_token_loss(
            batch,
            who="grpo",
            clip_low=o.clip_low,
            clip_high=o.clip_high,
            correction=o.rollout_correction(),
            aggregation=o.aggregation,
            kl_coef=o.kl_coef,
        )
