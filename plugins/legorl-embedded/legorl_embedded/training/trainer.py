"""The "embedded" trainer plugin: our own torch loop, on CPU or one GPU.

Each step rolls out groups of trials, turns their recorded segments into rows, takes one
AdamW step on the optimizer's loss (micro-batches packed by token budget, gradients
accumulated, recorded MoE routing replayed), reports train/inference consistency, pushes
the new weights to the inference backend as the next policy version and rewrites the
resumable state (``checkpoints/last``): re-running into the same run dir continues there.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from lego_rl.data import Attribution
from lego_rl.kinds import Group, LoadsWeights, Problem, RestoresRngState, RunContext, UsesReference
from lego_rl.registry import BuildContext
from lego_rl.spec.models import WarmstartSpec
from legorl_embedded.objectives.batch import PolicyBatch, Rows, build_rows
from legorl_embedded.objectives.consistency import Consistency
from legorl_embedded.options import EmbeddedTrainerOptions
from legorl_embedded.policy.logprobs import token_logprobs
from legorl_embedded.policy.model_spec import resolve_model_paths
from legorl_embedded.policy.output_vocab import OutputVocab, model_output_vocab
from legorl_embedded.policy.replay import RoutingReplay, routing_table
from legorl_embedded.policy.routing import find_routers
from legorl_embedded.training.adamw import adamw
from legorl_embedded.training.resume import TrainerState, last_state_dir, load_state, save_state


@dataclass
class Scoring:
    """How trained tokens are scored: as the inference backend sampled them.

    Temperature only: top-p / top-k truncation of the rollout is not reproduced, the TIS
    weight of the objective absorbs that difference (see legorl_embedded.objectives.surrogate).
    """

    temperature: float
    vocab: OutputVocab
    """The ids the model emits, as inference samples them."""
    reference: nn.Module | None
    """Frozen initial policy, when the objective has a KL penalty."""
    device: torch.device
    replay: bool = True
    """Force recorded MoE routing in the forward (routing replay)."""
    routing_shape: tuple[int, int] | None = None
    """(MoE layers, experts per token) of the model; None for a dense model."""

    share_prefix: bool = True
    """Compute the rows' common prompt prefix once (exact; see legorl_embedded.policy.prefix)."""

    def logprobs(
        self,
        model: nn.Module,
        ids: torch.Tensor,
        attn: torch.Tensor,
        mask: torch.Tensor,
        routing: RoutingReplay | None = None,
    ) -> torch.Tensor:
        return token_logprobs(
            model, ids, attn, where=mask.bool(), temperature=self.temperature, vocab=self.vocab,
            share_prefix=self.share_prefix,
            same_routing=routing.same_routing() if routing is not None else None,
            on_pass=routing.use if routing is not None else lambda name, prefix: None,
        )  # fmt: skip

    def routing(self, model: nn.Module, micro: Rows) -> RoutingReplay:
        """Replay (or, with replay off, only compare) the micro-batch's recorded routing.

        Keep it open over ``backward()``: gradient checkpointing re-runs the routers there.
        """
        table = None
        if self.routing_shape is not None and micro.routing:
            table = routing_table(micro.routing, micro.ids.shape[1], *self.routing_shape)
        return RoutingReplay(model, table, replay=self.replay)


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

    inference_needs: tuple[type, ...] = (LoadsWeights,)
    """:class:`~lego_rl.kinds.NeedsInference`: every update is pushed to the inference backend."""

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

    def supervise(self, demos: list[Any], plan: WarmstartSpec, target: Path, log: Callable[[str], None]) -> dict[str, float]:
        """The warm start's supervised pass (``legorl warmstart``): fit the policy the spec
        builds to the demonstrations' replies and save it to ``target``."""
        from legorl_embedded.training.supervise import supervise

        spec = self.build_ctx.spec
        if spec is None:
            raise ValueError("the embedded trainer needs the spec to warm-start; build it from a spec")
        model = resolve_model_paths(spec.model, self.build_ctx)
        return supervise(model, demos, plan, target, seed=spec.run.seed, threads=self.options.threads, log=log)

    def device(self) -> torch.device:
        wanted = self.options.device
        if wanted == "auto":
            wanted = "cuda" if torch.cuda.is_available() else "cpu"
        return torch.device(wanted)

    def run(self, ctx: RunContext) -> None:
        from legorl_embedded.policy.model import build_model, save_checkpoint

        load_weights = _weight_sink(ctx.inference)
        if self.options.threads:
            torch.set_num_threads(self.options.threads)
        device = self.device()
        tokenizer = ctx.inference.tokenizer
        spec_model = resolve_model_paths(ctx.spec.model, self.build_ctx)
        model = build_model(spec_model, tokenizer, ctx.spec.run.seed).float().to(device)
        if self.options.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        model.train()
        opt = adamw(model.parameters(), self.options.lr, self.options.weight_decay)
        warmup = self.options.warmup_steps
        schedule = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0
        )
        routers = find_routers(model)
        scoring = Scoring(
            temperature=ctx.spec.run.temperature or 1.0,  # 0 is greedy: no distribution to match
            vocab=model_output_vocab(model, tokenizer),
            reference=_frozen_copy(model)
            if isinstance(ctx.optimizer, UsesReference) and ctx.optimizer.needs_reference
            else None,
            device=device,
            replay=self.options.routing_replay == "replay",
            # a checkpointing recompute re-runs the routers outside the prefix/rest passes
            share_prefix=not self.options.gradient_checkpointing,
            routing_shape=(len(routers), int(routers[0].top_k)) if routers else None,
        )
        first = self._resume(ctx, model, opt, schedule)
        load_weights(model.state_dict(), version=first)
        steps = ctx.spec.run.steps
        for step in range(first, steps):
            started = time.perf_counter()
            groups = ctx.rollout(step)
            rollout_seconds = time.perf_counter() - started
            kept = [g for g in groups if ctx.filter.keep_group(g)]
            trainable = [g for g in map(_without_infrastructure, kept) if g]
            infrastructure = sum(map(len, kept)) - sum(map(len, trainable))
            advantages = [ctx.optimizer.advantages(g) for g in trainable]
            rows = build_rows(trainable, advantages, subagents=ctx.spec.run.subagents == "train")
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
            every = self.options.state_every if self.options.checkpoint != "none" else 0
            if every and ((step + 1) % every == 0 or step + 1 == steps):
                self._save_state(ctx, model, opt, schedule, step + 1)
        if self.options.checkpoint != "none":
            self._checkpoint(ctx, save_checkpoint, model, tokenizer, "final", steps)

    def _resume(
        self,
        ctx: RunContext,
        model: nn.Module,
        opt: torch.optim.Optimizer,
        schedule: torch.optim.lr_scheduler.LRScheduler,
    ) -> int:
        """Load the state to continue from; returns the first step to run.

        The engine says where (``ctx.extra["resume_from"]``, None for a fresh run); without
        an engine's word, this run dir's ``checkpoints/last``.
        """
        where = ctx.extra.get("resume_from", last_state_dir(ctx.run_dir))
        state = load_state(Path(where)) if where else None
        if state is None:
            return 0
        model.load_state_dict(state.model)
        opt.load_state_dict(state.optimizer)
        schedule.load_state_dict(state.schedule)
        torch.set_rng_state(state.torch_rng)
        if isinstance(ctx.inference, RestoresRngState) and state.inference_rng is not None:
            ctx.inference.set_rng_state(state.inference_rng)
        ctx.restore_engine(state.engine)
        ctx.event("resume", step=state.step, path=str(where))
        ctx.log(f"resumed from {where} at step {state.step + 1}")
        return state.step

    @staticmethod
    def _save_state(
        ctx: RunContext,
        model: nn.Module,
        opt: torch.optim.Optimizer,
        schedule: torch.optim.lr_scheduler.LRScheduler,
        step: int,
    ) -> None:
        state = TrainerState(
            step=step,
            model=model.state_dict(),
            optimizer=opt.state_dict(),
            schedule=schedule.state_dict(),
            torch_rng=torch.get_rng_state(),
            inference_rng=ctx.inference.get_rng_state() if isinstance(ctx.inference, RestoresRngState) else None,
            engine=ctx.engine_state(),
        )
        save_state(ctx.run_dir, state)

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
        consistency = Consistency()
        tokens = float(rows.trained_tokens)
        trials = rows.trials if len(rows) else 0
        device = scoring.device
        for micro in rows.micro_batches(self.options.micro_batch_tokens):
            ids, attn, mask = (
                micro.ids.to(device),
                micro.attention_mask.to(device),
                micro.mask.to(device),
            )
            with scoring.routing(model, micro) as routing:
                ref = None
                if scoring.reference is not None:
                    with torch.no_grad(), scoring.routing(scoring.reference, micro) as ref_routing:
                        ref = scoring.logprobs(scoring.reference, ids, attn, mask, ref_routing)
                batch = PolicyBatch(
                    logprobs=scoring.logprobs(model, ids, attn, mask, routing),
                    inference_logprobs=micro.logprobs.to(device),
                    mask=mask,
                    advantages=micro.advantages.to(device),
                    seq_tokens=micro.seq_tokens.to(device),
                    token_total=tokens,
                    seq_total=float(trials),
                    ref_logprobs=ref,
                    trial=micro.trial.to(device),
                )
                loss, metrics = loss_fn(batch)
                loss.backward()
            consistency.add(batch.logprobs, batch.inference_logprobs, mask)
            recorded = routing.table.recorded if routing.table is not None else 0
            consistency.add_routing(*routing.counts(), recorded, int(attn.sum().item()))
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
        if consistency.n:
            averaged.update(consistency.metrics())
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
        rollout = ctx.extra.get("rollout_metrics", dict)()
        ctx.event(
            "step",
            **{k: v for k, v in rollout.items() if k not in metrics and k != "step"},
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
    if not isinstance(inference, LoadsWeights):
        raise TypeError(
            f"the embedded trainer pushes weights to its inference backend, but "
            f"{type(inference).__name__} has no load_weights(state_dict, version); use "
            f"inference plugin 'hf' (or one that accepts weights) with trainer 'embedded'"
        )
    return inference.load_weights


def _without_infrastructure(group: Group) -> Group:
    """Trials that failed through our infrastructure say nothing about the policy."""
    return [t for t in group if t.attribution != Attribution.INFRASTRUCTURE]


def _frozen_copy(model: nn.Module) -> nn.Module:
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref
