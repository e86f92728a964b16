"""The "embedded" trainer plugin: our own torch loop, on CPU or one GPU.

Each step rolls out groups of trials, turns their recorded segments into rows, takes one
AdamW step on the optimizer's loss (micro-batched, gradients accumulated), and pushes the
new weights to the inference backend as the next policy version.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from lego_rl.data import Attribution
from lego_rl.engine.context import Group, RunContext
from lego_rl.kinds import Problem
from lego_rl.registry import BuildContext
from legorl_embedded.model_spec import resolve_model_paths
from legorl_embedded.options import EmbeddedTrainerOptions
from legorl_embedded.batch import PolicyBatch, Rows, build_rows
from legorl_embedded.logprobs import token_logprobs


@dataclass
class Scoring:
    """How trained tokens are scored: as the inference backend sampled them."""

    temperature: float
    vocab: int
    """Output ids the tokenizer knows; wider heads are cut to it, as inference does."""
    reference: nn.Module | None
    """Frozen initial policy, when the objective has a KL penalty."""
    device: torch.device

    def logprobs(
        self, model: nn.Module, ids: torch.Tensor, attn: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        return token_logprobs(
            model, ids, attn, where=mask.bool(), temperature=self.temperature, vocab=self.vocab
        )


@dataclass
class StepResult:
    """What one optimizer step did (micro-batch metrics averaged over trained tokens)."""

    loss: float
    grad_norm: float
    trained_tokens: int
    trials: int
    skipped: int
    metrics: dict[str, float]
    updated: bool = True
    """False when the gradient was not finite and the update was skipped."""


class EmbeddedTrainer:
    """GRPO-style training in this process: fp32 torch model, AdamW, weights synced to inference."""

    def __init__(self, options: EmbeddedTrainerOptions, ctx: BuildContext | None = None) -> None:
        self.options = options
        self.build_ctx = ctx or BuildContext()

    def preflight(self) -> list[Problem]:
        if self.options.device == "cuda" and not torch.cuda.is_available():
            return [
                Problem(
                    "trainer.options.device is 'cuda' but this machine has no usable GPU "
                    "(the embedded trainer needs a GPU for it)",
                    fix="set trainer.options.device: cpu (or auto), or run on a GPU machine",
                )
            ]
        return []

    def device(self) -> torch.device:
        wanted = self.options.device
        if wanted == "auto":
            wanted = "cuda" if torch.cuda.is_available() else "cpu"
        return torch.device(wanted)

    def run(self, ctx: RunContext) -> None:
        from legorl_embedded.model import build_model, save_checkpoint

        load_weights = _weight_sink(ctx.inference)
        if self.options.threads:
            torch.set_num_threads(self.options.threads)
        device = self.device()
        tokenizer = ctx.inference.tokenizer
        spec_model = resolve_model_paths(ctx.spec.model, self.build_ctx)
        model = build_model(spec_model, tokenizer, ctx.spec.run.seed).float().to(device)
        model.train()
        load_weights(model.state_dict(), version=0)
        opt = torch.optim.AdamW(
            model.parameters(), lr=self.options.lr, weight_decay=self.options.weight_decay
        )
        warmup = self.options.warmup_steps
        schedule = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0
        )
        scoring = Scoring(
            temperature=ctx.spec.run.temperature or 1.0,  # 0 is greedy: no distribution to match
            vocab=len(tokenizer),
            reference=_frozen_copy(model)
            if getattr(ctx.optimizer, "needs_reference", False)
            else None,
            device=device,
        )
        steps = ctx.spec.run.steps
        for step in range(steps):
            started = time.perf_counter()
            groups = ctx.rollout(step)
            rollout_seconds = time.perf_counter() - started
            kept = [g for g in groups if ctx.filter.keep_group(g)]
            trainable = [g for g in map(_without_infrastructure, kept) if g]
            infrastructure = sum(map(len, kept)) - sum(map(len, trainable))
            advantages = [ctx.optimizer.advantages(g) for g in trainable]
            rows = build_rows(trainable, advantages)
            result = self.train_step(model, opt, rows, ctx.optimizer.loss, scoring)
            schedule.step()
            load_weights(model.state_dict(), version=step + 1)
            seconds = (time.perf_counter() - started, rollout_seconds)
            self._report(
                ctx, step, steps, groups, kept, advantages, infrastructure, result, seconds
            )
            if self.options.checkpoint == "every":
                self._checkpoint(
                    ctx, save_checkpoint, model, tokenizer, f"step-{step + 1}", step + 1
                )
        if self.options.checkpoint != "none":
            self._checkpoint(ctx, save_checkpoint, model, tokenizer, "final", steps)

    def train_step(
        self,
        model: nn.Module,
        opt: torch.optim.Optimizer,
        rows: Rows,
        loss_fn: Callable[[PolicyBatch], tuple[torch.Tensor, dict[str, float]]],
        scoring: Scoring,
    ) -> StepResult:
        """Accumulate the loss over micro-batches of ``rows``, clip, take one optimizer step."""
        opt.zero_grad(set_to_none=True)
        total_loss = 0.0
        sums: dict[str, float] = {}
        tokens = float(rows.trained_tokens)
        trials = rows.trials if len(rows) else 0
        device = scoring.device
        for micro in rows.micro_batches(self.options.micro_batch_tokens):
            ids, attn, mask = (
                micro.ids.to(device),
                micro.attention_mask.to(device),
                micro.mask.to(device),
            )
            ref = None
            if scoring.reference is not None:
                with torch.no_grad():
                    ref = scoring.logprobs(scoring.reference, ids, attn, mask)
            batch = PolicyBatch(
                logprobs=scoring.logprobs(model, ids, attn, mask),
                inference_logprobs=micro.logprobs.to(device),
                mask=mask,
                advantages=micro.advantages.to(device),
                seq_tokens=micro.seq_tokens.to(device),
                token_total=tokens,
                seq_total=float(trials),
                ref_logprobs=ref,
            )
            loss, metrics = loss_fn(batch)
            loss.backward()
            total_loss += float(loss.detach().item())
            weight = metrics.get("tokens", 0.0)
            for key, value in metrics.items():
                sums[key] = sums.get(key, 0.0) + (value if key == "tokens" else value * weight)
        grad_norm = float(
            torch.nn.utils.clip_grad_norm_(model.parameters(), self.options.max_grad_norm).item()
        )
        updated = math.isfinite(grad_norm)
        if updated:  # a non-finite gradient would poison every weight
            opt.step()
        opt.zero_grad(set_to_none=True)
        averaged = {
            k: (v if k == "tokens" else v / max(sums.get("tokens", 0.0), 1.0))
            for k, v in sums.items()
        }
        return StepResult(
            total_loss, grad_norm, int(tokens), trials, rows.skipped, averaged, updated
        )

    def _report(
        self,
        ctx: RunContext,
        step: int,
        steps: int,
        groups: list[Group],
        kept: list[Group],
        advantages: list[list[float]],
        infrastructure: int,
        result: StepResult,
        seconds: tuple[float, float],
    ) -> None:
        step_seconds, rollout_seconds = seconds
        rewards = [t.reward for g in groups for t in g]
        mean = sum(rewards) / len(rewards) if rewards else 0.0
        std = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5 if rewards else 0.0
        informative = sum(1 for a in advantages if any(x != 0.0 for x in a))
        metrics = {k: v for k, v in result.metrics.items() if k != "tokens"}
        ctx.event(
            "step",
            step=step,
            reward_mean=mean,
            reward_std=std,
            loss=result.loss,
            informative_groups=informative,
            groups=len(groups),
            kept_groups=len(kept),
            trials=len(rewards),
            filtered_trials=len(rewards) - sum(map(len, kept)),
            infrastructure_trials=infrastructure,
            skipped_trials=result.skipped,
            trained_trials=result.trials,
            trained_tokens=result.trained_tokens,
            grad_norm=result.grad_norm,
            step_seconds=step_seconds,
            rollout_seconds=rollout_seconds,
            policy_version=step + 1,
            updated=result.updated,
            **metrics,
        )
        note = "" if informative else "  (no informative group: loss 0)"
        if not result.updated:
            note += "  (gradient not finite: update skipped)"
        ctx.log(
            f"step {step + 1}/{steps}  reward {mean:.3f}  loss {result.loss:.4f}  "
            f"informative {informative}/{len(groups)}  tokens {result.trained_tokens}  "
            f"|Δlogp| {metrics.get('logp_diff_abs', 0.0):.4f}  grad {result.grad_norm:.3f}  "
            f"{step_seconds:.1f}s (rollout {rollout_seconds:.1f}s){note}"
        )

    @staticmethod
    def _checkpoint(
        ctx: RunContext,
        save: Callable[[nn.Module, Any, Path], Any],
        model: nn.Module,
        tokenizer: Any,
        name: str,
        step: int,
    ) -> None:
        path = ctx.run_dir / "checkpoints" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        save(model, tokenizer, path)
        ctx.event("checkpoint", path=str(path), step=step)
        ctx.log(f"checkpoint {path}")


def _weight_sink(inference: Any) -> Callable[..., None]:
    load = getattr(inference, "load_weights", None)
    if load is None:
        raise TypeError(
            f"the embedded trainer pushes weights to its inference backend, but "
            f"{type(inference).__name__} has no load_weights(state_dict, version); use "
            f"inference plugin 'hf' (or one that accepts weights) with trainer 'embedded'"
        )
    return load


def _without_infrastructure(group: Group) -> Group:
    """Trials that failed through our infrastructure say nothing about the policy."""
    return [t for t in group if t.attribution != Attribution.INFRASTRUCTURE]


def _frozen_copy(model: nn.Module) -> nn.Module:
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref
