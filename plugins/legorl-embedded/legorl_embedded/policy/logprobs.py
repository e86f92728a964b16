"""Per-token log-probs of a causal LM, computed without materialising the full logits.

The log-prob of token ``t`` comes from the logits at position ``t - 1``, so column 0 is
always 0. Only the positions asked for go through the output head, a chunk at a time, and
the backward pass recomputes each chunk instead of keeping it: at most one chunk of
``chunk_tokens x vocab`` float32 logits is alive at once (the Qwen3 vocabulary is ~151k).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from legorl_embedded.policy.output_vocab import OutputVocab
from legorl_embedded.policy.prefix import hidden_states, shared_prefix_length


def token_logprobs(
    model: nn.Module,
    ids: Tensor,
    attention_mask: Tensor,
    *,
    where: Tensor | None = None,
    temperature: float = 1.0,
    vocab: OutputVocab | int | None = None,
    chunk_tokens: int = 512,
    share_prefix: bool = False,
    same_routing: Tensor | None = None,
    on_pass: Callable[[str, int], None] = lambda name, prefix: None,
) -> Tensor:
    """``[B, T]`` log-prob of ``ids[:, t]`` given ``ids[:, :t]``; 0 where not computed.

    ``model`` is a Hugging Face causal LM (``base_model`` + ``get_output_embeddings()``).
    ``where`` (``[B, T]``, bool) limits the positions computed (default: every attended
    position after the first). Logits are divided by ``temperature`` first, so the result is
    the log-prob under the distribution the inference backend sampled from. ``vocab`` keeps
    only the ids the model emits (an :class:`OutputVocab`, as inference uses; an int: the
    first ids, for a head wider than the tokenizer); a token outside gets -inf.
    ``share_prefix`` computes the rows' common leading tokens once (see
    :mod:`legorl_embedded.policy.prefix`; ``same_routing`` and ``on_pass`` are its routing hooks).
    """
    wanted = attention_mask.bool() if where is None else where.bool() & attention_mask.bool()
    wanted = wanted.clone()
    wanted[:, 0] = False
    out = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
    # position t is predicted by the hidden state at t - 1
    source = torch.zeros_like(wanted)
    source[:, :-1] = wanted[:, 1:]
    prefix = shared_prefix_length(ids, attention_mask, source, same_routing) if share_prefix else 0
    hidden = hidden_states(model, ids, attention_mask, prefix, on_pass)
    head = model.get_output_embeddings()
    if not isinstance(vocab, OutputVocab):
        vocab = OutputVocab(head.weight.shape[0] if vocab is None else vocab)
    weight, bias = vocab.head(head.weight, head.bias)
    picked = _HeadLogprobs.apply(
        hidden[source], weight, bias, vocab.row_of(ids[wanted]), temperature, chunk_tokens
    )
    return out.masked_scatter(wanted, picked)


def completion_logprobs(
    model: nn.Module,
    prompt: Sequence[int],
    completion: Sequence[int],
    *,
    temperature: float,
    vocab: OutputVocab,
    device: torch.device,
) -> list[float]:
    """Log-prob of each ``completion`` token after ``prompt`` and the tokens before it: one
    forward pass of both, no gradient (how a sampled reply is scored for its record)."""
    ids = torch.tensor([[*prompt, *completion]], dtype=torch.long, device=device)
    where = torch.zeros_like(ids, dtype=torch.bool)
    where[0, len(prompt) :] = True
    with torch.inference_mode():
        scored = token_logprobs(model, ids, torch.ones_like(ids), where=where, temperature=temperature, vocab=vocab)
    return scored[0, len(prompt) :].float().cpu().tolist()


class _HeadLogprobs(torch.autograd.Function):
    """log_softmax(states @ weight.T + bias)[target] / temperature, chunked both ways; a
    target of -1 (a token the head cannot emit) gets -inf and no gradient."""

    @staticmethod
    def forward(
        ctx: Any,
        states: Tensor,
        weight: Tensor,
        bias: Tensor | None,
        targets: Tensor,
        temperature: float,
        chunk: int,
    ) -> Tensor:
        out = torch.empty(targets.shape, dtype=torch.float32, device=states.device)
        lse = torch.empty_like(out)
        outside = targets < 0
        targets = targets.clamp_min(0)
        for s in range(0, targets.numel(), chunk):
            logits = _logits(states[s : s + chunk], weight, bias, temperature)
            lse[s : s + chunk] = torch.logsumexp(logits, dim=-1)
            out[s : s + chunk] = logits.gather(-1, targets[s : s + chunk, None]).squeeze(-1)
        ctx.save_for_backward(states, weight, bias, targets, lse, outside)
        ctx.temperature, ctx.chunk = temperature, chunk
        return (out - lse).masked_fill(outside, float("-inf"))

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        states, weight, bias, targets, lse, outside = ctx.saved_tensors
        grad = grad.masked_fill(outside, 0.0)
        grad_states = torch.zeros_like(states)
        grad_weight = torch.zeros_like(weight, dtype=torch.float32)
        grad_bias = None if bias is None else torch.zeros_like(bias, dtype=torch.float32)
        rows = torch.arange(min(ctx.chunk, targets.numel()), device=states.device)
        for s in range(0, targets.numel(), ctx.chunk):
            g = grad[s : s + ctx.chunk].float()
            # d/dlogits of (logit[target] - lse) = onehot(target) - softmax, scaled by 1/T
            d = _logits(states[s : s + ctx.chunk], weight, bias, ctx.temperature)
            d.sub_(lse[s : s + ctx.chunk, None]).exp_().mul_(-g[:, None])
            d[rows[: len(g)], targets[s : s + ctx.chunk]] += g
            d.div_(ctx.temperature)
            grad_states[s : s + ctx.chunk] = (d.to(weight.dtype) @ weight).to(states.dtype)
            grad_weight.addmm_(d.t(), states[s : s + ctx.chunk].float())
            if grad_bias is not None:
                grad_bias += d.sum(0)
        grad_bias = None if grad_bias is None else grad_bias.to(bias.dtype)
        return grad_states, grad_weight.to(weight.dtype), grad_bias, None, None, None


def _logits(states: Tensor, weight: Tensor, bias: Tensor | None, temperature: float) -> Tensor:
    logits = F.linear(states, weight, bias).float()
    return logits / temperature if temperature != 1.0 else logits
