"""Rollout correction: importance weights and rejection masks for the trainer/inference mismatch.

The inference backend samples from a slightly different function than the trainer scores
(precision, kernels, batch shapes, routing). With ``log_ratio = old - inf`` per trained token
(log pi_train / pi_rollout), the methods of the field, as verl 0.9 names them
(``algorithm.rollout_correction``):

- importance weights (``is_level``): ``token``, ``w_t = rho_t = exp(log_ratio_t)``, or
  ``sequence``, one ``w = exp(sum_t log_ratio_t)`` over the trial's trained tokens (all its
  segments). ``is_threshold: C`` truncates (TIS, ``min(w, C)``); ``is_threshold: [lo, hi]``
  masks instead (IcePop: ``w`` where ``lo <= w <= hi``, else 0). ``None``: no weights.
- rejection masks (``reject``), each a ratio band ``[low, high]`` a token or trial must lie in
  or it weighs 0: ``token_k1`` on ``rho_t`` (masked IS, MIS, with ``[0, C]``), ``seq_sum_k1``
  on the trial's product ratio (sequence MIS), ``seq_mean_k1`` on its geometric mean (the
  geometric-mean sequence mask).

Everything is detached (weights change the measure, not the objective). A rejected token keeps
its place in the step's denominators, as a token with weight 0. Diagnostics per step:
``rollout_mismatch_k3`` (k3 estimate of KL(pi_rollout || pi_train) per token), ``rollout_ess``
(effective sample size of the weights over trained tokens, as a share: 1 when all are equal),
``rollout_masked_fraction`` (trained tokens weighing 0) and ``tis_capped_fraction`` (weights
the truncation cut).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from legorl_embedded.objectives.batch import PolicyBatch
from legorl_embedded.objectives.consistency import k3
from legorl_embedded.objectives.correction_options import RolloutCorrection

SAFETY = 20.0
"""Log-ratios are clamped to +-SAFETY before exponentiating (as verl does)."""


@dataclass
class Corrected:
    weight: Tensor
    """``[B, T]`` detached: each token's weight, 0 where masked or rejected."""
    metrics: dict[str, float]


def trial_sums(per_row: Tensor, batch: PolicyBatch) -> Tensor:
    """``[B]``: for each row, the sum of ``per_row`` over every row of its trial."""
    if batch.trial is None:
        return per_row
    _, index = torch.unique(batch.trial.to(per_row.device), return_inverse=True)
    totals = torch.zeros(int(index.max().item()) + 1 if index.numel() else 0, dtype=per_row.dtype, device=per_row.device)
    return totals.index_add(0, index, per_row)[index]


def correct(batch: PolicyBatch, old: Tensor, how: RolloutCorrection) -> Corrected:
    """Each trained token's weight under ``how`` and the diagnostics of the mismatch."""
    mask = batch.mask
    log_ratio = ((old - batch.inference_logprobs) * mask).detach()
    seq_log = trial_sums(log_ratio.sum(dim=1), batch).unsqueeze(1)  # [B, 1]
    seq_mean_log = seq_log / batch.seq_tokens.clamp(min=1.0).unsqueeze(1)
    token_ratio = log_ratio.clamp(-SAFETY, SAFETY).exp()
    capped = torch.zeros_like(mask, dtype=torch.bool)
    if how.is_level is None:
        weight = torch.ones_like(mask)
    else:
        raw = token_ratio if how.is_level == "token" else seq_log.clamp(-SAFETY, SAFETY).exp().expand_as(mask)
        if isinstance(how.is_threshold, tuple):
            low, high = how.is_threshold
            weight = torch.where((raw >= low) & (raw <= high), raw, torch.zeros_like(raw))
        else:
            capped = raw > how.is_threshold
            weight = raw.clamp(max=how.is_threshold)
    for rule in how.reject:
        value = {
            "token_k1": token_ratio,
            "seq_sum_k1": seq_log.clamp(-SAFETY, SAFETY).exp().expand_as(mask),
            "seq_mean_k1": seq_mean_log.clamp(-SAFETY, SAFETY).exp().expand_as(mask),
        }[rule.mode]
        weight = weight * ((value >= rule.low) & (value <= rule.high))
    weight = weight * mask
    return Corrected(weight.detach(), diagnostics(weight, log_ratio, capped, mask))


def diagnostics(weight: Tensor, log_ratio: Tensor, capped: Tensor, mask: Tensor) -> dict[str, float]:
    trained = mask > 0
    n = int(trained.sum().item())
    if n == 0:
        return {"rollout_mismatch_k3": 0.0, "rollout_ess": 1.0, "rollout_masked_fraction": 0.0,
                "tis_weight_mean": 1.0, "tis_capped_fraction": 0.0}  # fmt: skip
    w = weight[trained].double()
    square = float((w * w).sum().item())
    return {
        "rollout_mismatch_k3": float(k3(log_ratio[trained]).mean().item()),
        "rollout_ess": float(w.sum().item()) ** 2 / (n * square) if square > 0 else 0.0,
        "rollout_masked_fraction": float((w == 0).double().mean().item()),
        "tis_weight_mean": float(w.mean().item()),
        "tis_capped_fraction": float(capped[trained].double().mean().item()),
    }
