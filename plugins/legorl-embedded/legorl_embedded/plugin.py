"""Entry point of legorl-embedded.

Registration imports only the options models; torch and transformers load when a
component is first built, so `legorl validate` and `legorl plugins` stay fast.
"""

from __future__ import annotations

from typing import Any

from lego_rl import hookimpl
from lego_rl.registry import BuildContext

from legorl_embedded.options import EmbeddedTrainerOptions, GRPOOptions, HFInferenceOptions


def hf(options: HFInferenceOptions, ctx: BuildContext) -> Any:
    """In-process transformers policy: KV-cached sampling, sampled log-probs, routed experts."""
    from legorl_embedded.inference import factory

    return factory(options, ctx)


def grpo(options: GRPOOptions, ctx: BuildContext) -> Any:
    """GRPO: group-normalised advantages, clipped surrogate, truncated IS correction."""
    from legorl_embedded.grpo import GRPO

    return GRPO(options, ctx)


def embedded(options: EmbeddedTrainerOptions, ctx: BuildContext) -> Any:
    """Torch trainer in this process: fp32 policy, AdamW, weights synced to inference."""
    from legorl_embedded.trainer import EmbeddedTrainer

    return EmbeddedTrainer(options, ctx)


@hookimpl
def legorl_register_inference(register: Any) -> None:
    register("hf", hf, options=HFInferenceOptions)


@hookimpl
def legorl_register_optimizer(register: Any) -> None:
    register("grpo", grpo, options=GRPOOptions)


@hookimpl
def legorl_register_trainer(register: Any) -> None:
    register("embedded", embedded, options=EmbeddedTrainerOptions)
