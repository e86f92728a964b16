"""Pieces every objective shares: clipped token surrogate, TIS weights, segment-aware means.

Notation per token: ``logp`` the trainer's log-prob (with grad), ``old`` the trainer's
log-prob before the update (detached; equal to ``logp`` when each batch gets one update),
``inf`` the log-prob the inference backend sampled the token with, ``A`` the advantage of
the trial (the same for all of its segments).

Truncated importance sampling (TIS) corrects for the inference backend computing a slightly
different function than the trainer (precision, kernels, routing): ``w = min(exp(old - inf),
cap)``, detached. The trainer scores with temperature only; when the rollout also used top-p
or top-k, ``inf`` is a log-prob under the truncated distribution and ``w`` absorbs that
difference too (it stays below 1 on every token the truncation kept).

Normalisation is per *trial*, not per segment: ``seq_tokens`` counts a trial's trained
tokens over all its segments, so a trajectory split into many segments weighs what it would
weigh as one.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from legorl_embedded.objectives.batch import PolicyBatch
from legorl_embedded.objectives.consistency import k3
from legorl_embedded.objectives.correction import correct
from legorl_embedded.objectives.correction_options import RolloutCorrection

Aggregation = Literal["token-mean", "seq-mean-token-mean"]


def old_logprobs(batch: PolicyBatch) -> Tensor:
    return batch.logprobs.detach() if batch.old_logprobs is None else batch.old_logprobs


def tis_weight(log_ratio: Tensor, cap: float | None) -> Tensor:
    """``min(exp(log_ratio), cap)``, detached; ones when ``cap`` is None (correction off)."""
    if cap is None:
        return torch.ones_like(log_ratio)
    return log_ratio.detach().exp().clamp(max=cap)


def aggregate(per_token: Tensor, batch: PolicyBatch, how: Aggregation) -> Tensor:
    """This micro-batch's share of the step loss (the step's micro-batches sum to its mean).

    token-mean: every trained token of the step weighs the same. seq-mean-token-mean: mean
    over each trial's tokens (all its segments), then over the step's trials.
    """
    masked = per_token * batch.mask
    if how == "token-mean":
        return masked.sum() / max(batch.token_total, 1.0)
    per_row = masked.sum(dim=1) / batch.seq_tokens.clamp(min=1.0)
    return per_row.sum() / max(batch.seq_total, 1.0)


def kl_to_reference(batch: PolicyBatch, who: str) -> Tensor:
    """Per-token k3 estimate of KL(policy || reference)."""
    if batch.ref_logprobs is None:
        raise ValueError(
            f"{who}: kl_coef > 0 needs reference log-probs; the trainer must keep the "
            f"initial policy (set optimizer.options.kl_coef: 0 to train without KL)"
        )
    return k3(batch.ref_logprobs - batch.logprobs)


def masked_mean(x: Tensor, mask: Tensor) -> float:
    return float(((x.detach() * mask).sum() / mask.sum().clamp(min=1.0)).item())


def clipped_token_loss(
    batch: PolicyBatch,
    *,
    who: str,
    clip_low: float,
    clip_high: float,
    correction: RolloutCorrection,
    aggregation: Aggregation,
    kl_coef: float = 0.0,
    dual_clip: float | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """PPO's clipped surrogate per token, weighted by the rollout correction
    (:mod:`legorl_embedded.objectives.correction`: TIS, IcePop, masks), plus an optional k3 KL penalty::

        ratio = exp(logp - old)
        loss  = w * max(-A * ratio, -A * clip(ratio, 1 - clip_low, 1 + clip_high))
        (dual clip, A < 0 only: loss = min(loss, -A * dual_clip * w))
    """
    mask = batch.mask
    old = old_logprobs(batch)
    adv = batch.advantages.unsqueeze(1)
    ratio = torch.exp(batch.logprobs - old)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(unclipped, clipped)
    dual = torch.zeros_like(mask, dtype=torch.bool)
    if dual_clip is not None:
        bound = -adv * dual_clip
        dual = (adv < 0) & (per_token > bound)
        per_token = torch.where(adv < 0, torch.minimum(per_token, bound), per_token)
    corrected = correct(batch, old, correction)
    per_token = per_token * corrected.weight
    metrics = {
        "tokens": float(mask.sum().item()),
        "clip_fraction": masked_mean((clipped > unclipped).float(), mask),
        "ratio_mean": masked_mean(ratio, mask),
        **corrected.metrics,
        "logp_mean": masked_mean(batch.logprobs, mask),
    }
    if dual_clip is not None:
        metrics["dual_clip_fraction"] = masked_mean(dual.float(), mask)
    if kl_coef > 0:
        kl = kl_to_reference(batch, who)
        per_token = per_token + kl_coef * kl
        metrics["kl_ref"] = masked_mean(kl, mask)
    return aggregate(per_token, batch, aggregation), metrics
