"""Shared-prefix forward: the tokens every row of a batch starts with are computed once.

Every call of a harness starts with the same system prompt and tool list (hundreds to
thousands of tokens), so the rows of a training batch share a long prefix. The prefix runs
once (batch 1) with its key/value cache kept under gradient; the cache is repeated over the
rows and each row's remainder runs on top of it. Attention is causal, so the remainder's
hidden states are those of a full forward (up to float rounding), and gradients reach the
prefix through the cache: exact, not an approximation, at a fraction of the cost.

With routing replay the prefix is shared only as far as every row also recorded the same
routing, and the replay hook is pointed at each pass's own rows (see ``on_pass``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

MIN_SHARED = 32
"""Shorter common prefixes are not worth a second forward."""


def shared_prefix_length(
    ids: Tensor, attention_mask: Tensor, needed: Tensor, same_routing: Tensor | None = None
) -> int:
    """How many leading positions to compute once for all ``[B, T]`` rows (0: do not share).

    They must hold the same ids in every row, be attended in every row, agree in recorded
    routing where ``same_routing`` (``[T]`` bool) says so, and end before the first position
    whose hidden state is ``needed``.
    """
    if ids.shape[0] < 2:
        return 0
    equal = (ids == ids[:1]).all(0) & attention_mask.bool().all(0)
    if same_routing is not None:
        equal &= same_routing
    differs = (~equal).nonzero()
    common = int(differs[0]) if len(differs) else ids.shape[1]
    first_needed = needed.any(0).nonzero()
    limit = int(first_needed[0]) if len(first_needed) else ids.shape[1]
    length = min(common, limit)
    return length if length >= MIN_SHARED else 0


def hidden_states(
    model: nn.Module,
    ids: Tensor,
    attention_mask: Tensor,
    prefix: int,
    on_pass: Callable[[str, int], None] = lambda name, prefix: None,
) -> Tensor:
    """``[B, T, H]`` last hidden states; with ``prefix`` > 0 positions before it are zeros
    (never read: see :func:`shared_prefix_length`). ``on_pass(name, prefix)`` runs before
    each forward, name "full", or "prefix" then "rest" (routing replay switches tables there)."""
    base = model.base_model
    if prefix <= 0:
        on_pass("full", 0)
        return base(input_ids=ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    rows, width = ids.shape
    on_pass("prefix", prefix)
    head = base(input_ids=ids[:1, :prefix], use_cache=True)
    cache = head.past_key_values
    cache.batch_repeat_interleave(rows)
    positions = torch.arange(prefix, width, device=ids.device)
    on_pass("rest", prefix)
    rest = base(
        input_ids=ids[:, prefix:],
        attention_mask=attention_mask,
        past_key_values=cache,
        position_ids=positions.expand(rows, -1),
        cache_position=positions,
        use_cache=True,
    ).last_hidden_state
    skipped = rest.new_zeros(rows, prefix, rest.shape[-1])
    return torch.cat([skipped, rest], dim=1)
