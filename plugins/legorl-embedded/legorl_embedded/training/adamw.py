"""The AdamW every embedded training loop uses (RL trainer, warm start, consistency bench)."""

from __future__ import annotations

from collections.abc import Iterable

import torch


def adamw(params: Iterable[torch.nn.Parameter], lr: float, weight_decay: float = 0.0) -> torch.optim.AdamW:
    """AdamW with torch's fused kernel: one pass over each tensor instead of a dozen. On a CPU
    the default (per-tensor) step of a tiny Qwen3 with its two 151k-row vocabulary matrices
    (embedding and head, ~39M of its parameters) took 1.0 s, most of a training step; fused,
    0.14 s (same machine, one thread). Same update rule, same state (checkpoints interchange)."""
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True)
