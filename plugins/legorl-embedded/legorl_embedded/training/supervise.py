"""The supervised pass of a warm start: fit the policy to recorded oracle replies.

Each demonstration is one model call recorded through the real harness: the prompt ids the
proxy rendered and the reply ids the oracle script produced. The loss is the mean negative
log-prob of the reply tokens (prompt tokens are context only), each reply's tokens weighted by
its demonstration's ``weight`` (1 when it has none), at temperature 1, routed natively
(nothing to replay: the replies were not sampled from this policy).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch

from lego_rl.spec.models import ModelSpec, WarmstartSpec
from legorl_embedded.policy.logprobs import token_logprobs
from legorl_embedded.policy.output_vocab import OutputVocab, model_output_vocab
from legorl_embedded.training.adamw import adamw
from legorl_embedded.training.trained_rows import trained_rows

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
"""(ids, attention mask, reply mask), each ``[B, T]``, and each row's weight ``[B]``."""

Row = tuple[list[int], int, float]
"""Prompt + reply ids, the prompt's length, the reply's weight."""


def pack(demos: Sequence[Any], batch_tokens: int) -> list[Batch]:
    """Demonstrations sorted by length and packed into right-padded batches of at most
    ``batch_tokens`` padded tokens (a longer demonstration is a batch of its own)."""
    rows: list[Row] = sorted(
        (
            ([*d.prompt_ids, *d.completion_ids], len(d.prompt_ids), float(getattr(d, "weight", 1.0)))
            for d in demos
            if d.completion_ids
        ),
        key=lambda row: len(row[0]),
    )
    batches: list[Batch] = []
    group: list[Row] = []
    for row in rows:
        if group and len(row[0]) * (len(group) + 1) > batch_tokens:
            batches.append(_padded(group))
            group = []
        group.append(row)
    if group:
        batches.append(_padded(group))
    return batches


def _padded(group: list[Row]) -> Batch:
    width = max(len(ids) for ids, _, _ in group)
    ids = torch.zeros((len(group), width), dtype=torch.long)
    attention = torch.zeros_like(ids)
    reply = torch.zeros_like(ids, dtype=torch.bool)
    for i, (row, prompt, _) in enumerate(group):
        ids[i, : len(row)] = torch.tensor(row)
        attention[i, : len(row)] = 1
        reply[i, prompt : len(row)] = True
    return ids, attention, reply, torch.tensor([weight for _, _, weight in group])


def warmup_cosine(step: int, *, steps: int, floor: float) -> float:
    """Learning-rate factor: linear warm-up over the first tenth of ``steps``, then a cosine down
    to ``floor``, so the last epochs settle into a minimum instead of jumping around it at the
    peak rate (at a constant 3e-3 the quickstart's reply NLL rose from 0.089 to 0.125 over its
    last two epochs; with the decay it ends at 0.04-0.08)."""
    warmup = max(1, steps // 10)
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def supervise_model(
    model: torch.nn.Module,
    demos: Sequence[Any],
    plan: WarmstartSpec,
    *,
    vocab: OutputVocab | int,
    seed: int,
    log: Callable[[str], None] = print,
) -> dict[str, float]:
    """Train ``model`` in place on the demonstrations; per-epoch mean reply NLL in the result.
    With a restricted output vocabulary only the vocabulary rows the demonstrations reach are
    trained (the same update: see :mod:`legorl_embedded.training.trained_rows`)."""
    batches = pack(demos, plan.batch_tokens)
    if not isinstance(vocab, OutputVocab):
        vocab = OutputVocab(vocab)
    with trained_rows(model, (b[0] for b in batches), vocab) as rows:
        if rows is not None:
            batches = [(rows.ids(ids), attention, reply, weight) for ids, attention, reply, weight in batches]
            vocab = rows.vocab
        epochs, seconds = fit(model, batches, plan, vocab, seed, log)
    model.eval()
    return {
        "nll_first_epoch": epochs[0],
        "nll_last_epoch": epochs[-1],
        "batches": float(len(batches)),
        "seconds": seconds,
    }


def fit(
    model: torch.nn.Module,
    batches: list[Batch],
    plan: WarmstartSpec,
    vocab: OutputVocab,
    seed: int,
    log: Callable[[str], None],
) -> tuple[list[float], float]:
    """The epochs over ``batches`` as given, every row of the vocabulary matrices trained:
    per-epoch mean reply NLL, and the seconds they took."""
    steps = plan.epochs * len(batches)
    opt = adamw(model.parameters(), plan.lr)
    rate = partial(warmup_cosine, steps=steps, floor=plan.lr_floor)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, rate)
    order = random.Random(seed)
    model.train()
    started = time.perf_counter()
    epochs: list[float] = []
    for epoch in range(plan.epochs):
        total, tokens = 0.0, 0.0
        for ids, attention, reply, weight in order.sample(batches, len(batches)):
            logprobs = token_logprobs(model, ids, attention, where=reply, vocab=vocab, share_prefix=True)
            count = float((reply[:, 1:].sum(dim=1) * weight).sum())
            loss = -(logprobs.sum(dim=1) * weight).sum() / max(count, 1e-9)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            schedule.step()
            total, tokens = total + loss.item() * count, tokens + count
        epochs.append(total / max(tokens, 1))
        log(f"warm start: epoch {epoch + 1}/{plan.epochs}, reply NLL {epochs[-1]:.3f}")
    return epochs, time.perf_counter() - started


def cover_replies(model: torch.nn.Module, demos: Sequence[Any]) -> None:
    """With a restricted output vocabulary (``model.config.output_vocab``), add every reply
    token of the demonstrations to ``output_vocab_extra``, so the policy can emit the
    replies as they were tokenized (see :mod:`legorl_embedded.policy.output_vocab`)."""
    config = model.config
    if getattr(config, "output_vocab", None) is None:
        return
    extra = set(getattr(config, "output_vocab_extra", None) or [])
    extra |= {i for d in demos for i in d.completion_ids if i >= config.output_vocab}
    config.output_vocab_extra = sorted(extra)


def supervise(
    model_spec: ModelSpec,
    demos: Sequence[Any],
    plan: WarmstartSpec,
    target: Path,
    *,
    seed: int,
    threads: int | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, float]:
    """Build the policy as a run would, fit it to the demonstrations, save it to ``target``."""
    from legorl_embedded.policy.model import build_model, save_checkpoint
    from legorl_embedded.policy.tokenizer import load_tokenizer

    if threads:
        torch.set_num_threads(threads)
    tokenizer = load_tokenizer(model_spec.tokenizer, model_spec.chat_template)
    model = build_model(model_spec, tokenizer, seed).float()
    cover_replies(model, demos)
    vocab = model_output_vocab(model, tokenizer)
    metrics = supervise_model(model, demos, plan, vocab=vocab, seed=seed, log=log)
    save_checkpoint(model, tokenizer, target)
    return metrics
