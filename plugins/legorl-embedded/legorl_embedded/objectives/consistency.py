"""Train/inference consistency: how closely the trainer reproduces the sampled log-probs.

Compares, on every trained token, the log-prob the inference backend sampled it with (``q``)
with the trainer's own log-prob of the same token (``p``). Sums are accumulated over
micro-batches so a step's figures cover all of its tokens:

- ``prob_pearson``: Pearson correlation of the probabilities ``exp(q)`` and ``exp(p)``;
- ``logp_diff_abs`` / ``logp_diff_max``: mean and max of ``|p - q|``;
- ``k3_kl``: k3 estimate of KL(inference || trainer), ``r - 1 - log r`` with ``r = exp(p - q)``;
- ``ratio_outside``: share of tokens whose ratio ``r`` lies outside [0.8, 1.25];
- ``routing_agreement``: share of (token, MoE layer) pairs where the trainer's router picked
  the recorded experts; ``routing_recorded_share``: share of the forward's tokens that had
  recorded routing (the rest route natively under replay).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from torch import Tensor

RATIO_BAND = (0.8, 1.25)


def k3(log_ratio: Tensor) -> Tensor:
    """k3 estimator of KL(q || p) from samples of q, given ``log(p / q)``: ``r - 1 - log r``."""
    return log_ratio.exp() - 1.0 - log_ratio


@dataclass
class Consistency:
    """Running sums over the trained tokens of one step (or one benchmark run)."""

    n: float = 0.0
    sums: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(("x", "y", "xx", "yy", "xy", "abs", "k3", "out"), 0.0)
    )
    max_abs: float = 0.0
    routing: list[int] = field(default_factory=lambda: [0, 0])
    """[agreeing, compared] (token, layer) pairs."""
    tokens: list[int] = field(default_factory=lambda: [0, 0])
    """[with recorded routing, in the forward]."""

    def add(self, trainer: Tensor, inference: Tensor, mask: Tensor) -> None:
        """Add the tokens where ``mask`` is set (all ``[B, T]``; gradients are ignored)."""
        on = mask.bool()
        p, q = trainer.detach()[on].double(), inference.detach()[on].double()
        if p.numel() == 0:
            return
        diff = p - q
        x, y = q.exp(), p.exp()
        low, high = RATIO_BAND
        ratio = diff.exp()
        s = self.sums
        s["x"] += float(x.sum())
        s["y"] += float(y.sum())
        s["xx"] += float((x * x).sum())
        s["yy"] += float((y * y).sum())
        s["xy"] += float((x * y).sum())
        s["abs"] += float(diff.abs().sum())
        s["k3"] += float(k3(diff).sum())
        s["out"] += float(((ratio < low) | (ratio > high)).sum())
        self.n += p.numel()
        self.max_abs = max(self.max_abs, float(diff.abs().max()))

    def add_routing(self, agreeing: int, compared: int, recorded: int, tokens: int) -> None:
        self.routing[0] += agreeing
        self.routing[1] += compared
        self.tokens[0] += recorded
        self.tokens[1] += tokens

    def pearson(self) -> float:
        n, s = self.n, self.sums
        if n < 2:
            return float("nan")
        cov = s["xy"] - s["x"] * s["y"] / n
        var_x = s["xx"] - s["x"] ** 2 / n
        var_y = s["yy"] - s["y"] ** 2 / n
        if var_x <= 0 or var_y <= 0:
            return 1.0 if var_x <= 0 and var_y <= 0 else 0.0
        return cov / math.sqrt(var_x * var_y)

    def metrics(self) -> dict[str, float]:
        """The figures named in the module docstring (routing ones only when routing was seen)."""
        n = max(self.n, 1.0)
        out = {
            "prob_pearson": self.pearson(),
            "logp_diff_abs": self.sums["abs"] / n,
            "logp_diff_max": self.max_abs,
            "k3_kl": self.sums["k3"] / n,
            "ratio_outside": self.sums["out"] / n,
        }
        if self.tokens[1]:
            out["routing_recorded_share"] = self.tokens[0] / self.tokens[1]
            if self.routing[1]:
                out["routing_agreement"] = self.routing[0] / self.routing[1]
        return out
