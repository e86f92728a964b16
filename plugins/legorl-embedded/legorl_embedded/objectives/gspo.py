"""The "gspo" optimizer plugin: Group Sequence Policy Optimization (sequence-level ratio).

Advantages are GRPO's (group-normalised rewards). The importance ratio is one per trial,
the geometric mean of its token ratios over all of its segments, and so is the clip and the
TIS correction::

    s_i  = exp(mean_t(logp - old))          # over trial i's trained tokens
    w_i  = min(exp(mean_t(old - inf)), cap) # sequence-level TIS, detached
    L_i  = w_i * max(-A_i * s_i, -A_i * clip(s_i, 1 - clip_low, 1 + clip_high))
    loss = sum_i L_i / trials               (+ kl_coef * per-trial mean k3 to the reference)

The clip range is much narrower than PPO's because a length-normalised ratio moves little.
The means need every segment of a trial in the same micro-batch: the trainer packs micro-
batches by trial (:meth:`~legorl_embedded.objectives.batch.Rows.micro_batches`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from lego_rl.data import TrialResult
from lego_rl.registry import BuildContext
from legorl_embedded.objectives.batch import PolicyBatch
from legorl_embedded.objectives.grpo import GRPO
from legorl_embedded.objectives.surrogate import (
    aggregate,
    kl_to_reference,
    masked_mean,
    old_logprobs,
    tis_weight,
)
from legorl_embedded.options import GRPOOptions, GSPOOptions


class GSPO:
    """Sequence-level clipped objective with group-normalised advantages."""

    def __init__(self, options: GSPOOptions, ctx: BuildContext | None = None) -> None:
        self.options = options
        self._advantages = GRPO(GRPOOptions(normalize_std=options.normalize_std))

    @property
    def needs_reference(self) -> bool:
        return self.options.kl_coef > 0

    def advantages(self, group: list[TrialResult]) -> list[float]:
        return self._advantages.advantages(group)

    def loss(self, batch: PolicyBatch) -> tuple[Tensor, dict[str, float]]:
        o = self.options
        mask = batch.mask
        old = old_logprobs(batch)
        trial = batch.trial if batch.trial is not None else torch.arange(mask.shape[0])
        _, index = torch.unique(trial.to(mask.device), return_inverse=True)
        count = int(index.max().item()) + 1 if index.numel() else 0
        per_row_token = mask / batch.seq_tokens.clamp(min=1.0).unsqueeze(1)

        def per_trial(x: Tensor) -> Tensor:
            """Mean over each trial's trained tokens, ``[trials]``."""
            sums = (x * per_row_token).sum(dim=1)
            return torch.zeros(count, dtype=sums.dtype, device=sums.device).index_add(0, index, sums)

        ratio = torch.exp(per_trial(batch.logprobs - old))
        adv = torch.zeros(count, device=mask.device).index_copy(0, index, batch.advantages)
        unclipped = -adv * ratio
        clipped = -adv * ratio.clamp(1.0 - o.clip_low, 1.0 + o.clip_high)
        weight = tis_weight(per_trial(old - batch.inference_logprobs), o.tis_cap)
        trained = torch.zeros(count, device=mask.device).index_add(0, index, mask.sum(1)) > 0
        per_seq = torch.maximum(unclipped, clipped) * weight * trained
        loss = per_seq.sum() / max(batch.seq_total, 1.0)
        n = trained.sum().clamp(min=1)

        def seq_mean(x: Tensor) -> float:
            return float(((x.detach() * trained).sum() / n).item())

        metrics = {
            "tokens": float(mask.sum().item()),
            "clip_fraction": seq_mean((clipped > unclipped).float()),
            "ratio_mean": seq_mean(ratio),
            "tis_weight_mean": seq_mean(weight),
            "tis_capped_fraction": seq_mean((weight == o.tis_cap).float())
            if o.tis_cap is not None
            else 0.0,
            "logp_mean": masked_mean(batch.logprobs, mask),
        }
        if o.kl_coef > 0:
            kl = kl_to_reference(batch, "gspo")
            loss = loss + o.kl_coef * aggregate(kl, batch, "seq-mean-token-mean")
            metrics["kl_ref"] = masked_mean(kl, mask)
        return loss, metrics
