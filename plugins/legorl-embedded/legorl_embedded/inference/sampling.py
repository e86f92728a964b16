"""Sampling math of the ``hf`` backend: temperature, top-k, top-p and inverse-CDF draws.

Works on a batch of rows. :func:`draw` samples rows that share one :class:`Sampling`, each
row with its own generator (so a seeded request draws the same numbers alone or batched);
:func:`draw_rows` groups the rows of a mixed batch by their sampling parameters.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lego_rl.data import Sampling


def sampling_logprobs(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """Log-probs ``(rows, vocab)`` of the distribution sampled from: temperature, top-k, top-p.

    Excluded ids get -inf. Temperature 0 is greedy and is handled by :func:`draw`.
    """
    scaled = logits.float() / max(sampling.temperature, 1e-6)
    if 0 < sampling.top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, sampling.top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if sampling.top_p < 1.0:
        ordered, order = torch.sort(scaled, dim=-1, descending=True)
        probs = torch.softmax(ordered, dim=-1)
        before = torch.cumsum(probs, dim=-1) - probs  # mass strictly above each id
        drop = before >= sampling.top_p
        drop[..., 0] = False
        scaled = scaled.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))
    return torch.log_softmax(scaled, dim=-1)


def draw(
    logits: torch.Tensor, sampling: Sampling, generators: Sequence[torch.Generator]
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row (row ``i`` drawn with ``generators[i]``) and its log-prob under the
    distribution it was drawn from."""
    if sampling.temperature == 0:
        return logits.argmax(dim=-1), torch.zeros(logits.shape[0])
    logprobs = sampling_logprobs(logits, sampling)
    # Inverse-CDF sampling: several times faster than torch.multinomial over a 151k vocabulary.
    cdf = logprobs.exp().cumsum(dim=-1)
    u = torch.cat([torch.rand(1, 1, generator=g) for g in generators]) * cdf[:, -1:]
    tokens = torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp_max(logits.shape[-1] - 1)
    return tokens, logprobs.gather(-1, tokens[:, None]).squeeze(-1)


def draw_rows(
    logits: torch.Tensor, samplings: Sequence[Sampling], generators: Sequence[torch.Generator]
) -> tuple[list[int], list[float]]:
    """Row ``i`` of ``logits`` sampled with ``samplings[i]`` and ``generators[i]``: tokens, log-probs."""
    groups: dict[tuple[float, int, float], list[int]] = {}
    for i, s in enumerate(samplings):
        groups.setdefault((s.temperature, s.top_k, s.top_p), []).append(i)
    tokens, logprobs = [0] * len(samplings), [0.0] * len(samplings)
    for rows in groups.values():
        picked, lp = draw(logits[rows], samplings[rows[0]], [generators[i] for i in rows])
        for i, token, value in zip(rows, picked.tolist(), lp.tolist(), strict=True):
            tokens[i], logprobs[i] = token, value
    return tokens, logprobs
