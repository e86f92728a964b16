"""The "grpo" optimizer plugin: group-relative advantages and a clipped surrogate loss.

Per token, with ``old`` the trainer's log-prob before the update (detached) and ``inf``
the log-prob the inference backend sampled the token with::

    ratio = exp(logp - old)                     # 1 at the first (here: only) update
    w     = min(exp(old - inf), tis_cap)        # truncated importance sampling, detached
    loss  = w * max(-A * ratio, -A * clip(ratio, 1 - clip_low, 1 + clip_high))
            + kl_coef * k3(ref || logp)

The embedded trainer makes one update per batch, so ``ratio`` only matters for its
gradient; ``w`` corrects for the inference backend computing a slightly different
function than the trainer (precision, kernels, routing), which the rollout was sampled from.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor

from lego_rl.data import TrialResult
from lego_rl.registry import BuildContext
from legorl_embedded.options import GRPOOptions
from legorl_embedded.batch import PolicyBatch


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
        rewards = [r.reward for r in group]
        mean = sum(rewards) / len(rewards) if rewards else 0.0
        if all(abs(r - mean) < 1e-9 for r in rewards):
            return [0.0] * len(rewards)
        centred = [r - mean for r in rewards]
        if not self.options.normalize_std:
            return centred
        std = math.sqrt(sum(c * c for c in centred) / (len(rewards) - 1))
        return [c / (std + 1e-6) for c in centred]

    def loss(self, batch: PolicyBatch) -> tuple[Tensor, dict[str, float]]:
        o = self.options
        mask = batch.mask
        logp = batch.logprobs
        old = logp.detach() if batch.old_logprobs is None else batch.old_logprobs
        adv = batch.advantages.unsqueeze(1)
        ratio = torch.exp(logp - old)
        unclipped = -adv * ratio
        clipped = -adv * ratio.clamp(1.0 - o.clip_low, 1.0 + o.clip_high)
        per_token = torch.maximum(unclipped, clipped)
        drift = (old - batch.inference_logprobs) * mask
        weight = (
            drift.exp().clamp(max=o.tis_cap) if o.tis_cap is not None else torch.ones_like(logp)
        )
        per_token = per_token * weight.detach()
        kl_ref = None
        if o.kl_coef > 0:
            if batch.ref_logprobs is None:
                raise ValueError(
                    "grpo: kl_coef > 0 needs reference log-probs; the trainer must keep the "
                    "initial policy (set optimizer.options.kl_coef: 0 to train without KL)"
                )
            kl_ref = _k3(batch.ref_logprobs - logp)
            per_token = per_token + o.kl_coef * kl_ref
        loss = self._aggregate(per_token * mask, batch)
        return loss, self._metrics(batch, ratio, unclipped, clipped, drift, weight, kl_ref)

    def _aggregate(self, masked: Tensor, batch: PolicyBatch) -> Tensor:
        if self.options.aggregation == "token-mean":
            return masked.sum() / max(batch.token_total, 1.0)
        per_row = masked.sum(dim=1) / batch.seq_tokens.clamp(min=1.0)
        return per_row.sum() / max(batch.seq_total, 1.0)

    @staticmethod
    def _metrics(
        batch: PolicyBatch,
        ratio: Tensor,
        unclipped: Tensor,
        clipped: Tensor,
        drift: Tensor,
        weight: Tensor,
        kl_ref: Tensor | None,
    ) -> dict[str, float]:
        """Means over this batch's trained tokens (``tokens`` says how many)."""
        mask = batch.mask
        n = mask.sum().clamp(min=1.0)

        def mean(x: Tensor) -> float:
            return float(((x.detach() * mask).sum() / n).item())

        metrics: dict[str, Any] = {
            "tokens": float(mask.sum().item()),
            "clip_fraction": mean((clipped > unclipped).float()),
            "ratio_mean": mean(ratio),
            "logp_diff_abs": mean(drift.abs()),
            "k3_inference": mean(_k3(-drift)),
            "tis_weight_mean": mean(weight),
            "logp_mean": mean(batch.logprobs),
        }
        if kl_ref is not None:
            metrics["kl_ref"] = mean(kl_ref)
        return metrics


def _k3(log_ratio: Tensor) -> Tensor:
    """k3 estimator of KL(q || p) from samples of q, given log(p/q): r - 1 - log r."""
    return log_ratio.exp() - 1.0 - log_ratio
