"""Contracts of the model side: inference samples with log-probs, the trainer can run."""

from __future__ import annotations

from typing import Any

from lego_rl.data import Sampling
from lego_rl.kinds import ScoresTokens
from lego_rl.testing.contracts.base import (
    ContractEnv,
    contract,
    expect,
    no_fatal_problems,
    problems,
    satisfies_protocol,
)


@contract("inference", "structure")
def inference_structure(component: Any, env: ContractEnv) -> None:
    """it has the Inference shape and a well-formed preflight"""
    satisfies_protocol(component, "inference")
    problems(component)
    expect(isinstance(component.policy_version, int), "policy_version must be an int")


@contract("inference", "samples")
def samples(component: Any, env: ContractEnv) -> None:
    """generate() samples within max_tokens with one log-prob (and routing entry) per token"""
    no_fatal_problems(component)
    ids = prompt_ids(component, "hi")
    streamed: list[int] = []
    gen = component.generate(
        list(ids), Sampling(max_tokens=4, temperature=1.0), on_token=lambda t, lp: streamed.append(t)
    )
    n = len(gen.completion_ids)
    expect(1 <= n <= 4, f"expected 1..4 tokens, got {n}")
    expect(len(gen.logprobs) == n, "one log-prob per sampled token")
    expect(all(lp <= 1e-6 for lp in gen.logprobs), "log-probs must be <= 0")
    expect(streamed == list(gen.completion_ids), f"on_token saw {streamed}, generated {gen.completion_ids}")
    if gen.routing is not None:
        expect(len(gen.routing) == n, "one routing entry per sampled token")


LOGPROB_MEAN_TOLERANCE = 0.02
LOGPROB_MAX_TOLERANCE = 0.25
"""How far generate()'s log-probs may lie from the backend's own scoring of the same tokens
(nats, per token; mean and worst). An fp32 engine agrees to ~1e-5; the bounds leave room for a
bf16 engine whose decode and prefill kernels differ, and none for a made-up number."""


@contract("inference", "logprobs-are-the-models")
def logprobs_are_the_models(component: Any, env: ContractEnv) -> None:
    """generate()'s log-probs are the model's own: they match its scoring of the same tokens (ScoresTokens)"""
    expect(
        isinstance(component, ScoresTokens),
        "an inference backend must score given tokens (lego_rl.kinds.ScoresTokens: score(prompt_ids, "
        "completion_ids, temperature)) so its sampled log-probs can be checked against the model",
    )
    no_fatal_problems(component)
    ids = prompt_ids(component, "Write a haiku about sandboxes.")
    gen = component.generate(list(ids), Sampling(max_tokens=12, temperature=1.0))
    expect(bool(gen.completion_ids), "generate() sampled nothing to compare")
    scored = component.score(list(ids), list(gen.completion_ids), 1.0)
    expect(len(scored) == len(gen.completion_ids), f"score() gave {len(scored)} log-probs for {len(gen.completion_ids)} tokens")
    gaps = [abs(a - b) for a, b in zip(gen.logprobs, scored, strict=True)]
    mean, worst = sum(gaps) / len(gaps), max(gaps)
    expect(
        mean <= LOGPROB_MEAN_TOLERANCE and worst <= LOGPROB_MAX_TOLERANCE,
        f"sampled log-probs differ from the model's scoring of the same tokens: mean |d| {mean:.4f} "
        f"(<= {LOGPROB_MEAN_TOLERANCE}), max {worst:.4f} (<= {LOGPROB_MAX_TOLERANCE}); "
        f"sampled {[round(x, 3) for x in gen.logprobs[:6]]}, scored {[round(x, 3) for x in scored[:6]]}",
    )


def prompt_ids(component: Any, text: str) -> list[int]:
    """``text`` as one user turn through the backend's chat template, generation prompt added."""
    tok = component.tokenizer
    rendered = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False)
    return list(tok.encode(rendered, add_special_tokens=False))


@contract("trainer", "structure")
def trainer_structure(component: Any, env: ContractEnv) -> None:
    """it has the Trainer shape and a well-formed preflight"""
    satisfies_protocol(component, "trainer")
    problems(component)
