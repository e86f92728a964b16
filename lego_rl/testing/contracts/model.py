"""Contracts of the model side: inference samples with log-probs, the trainer can run."""

from __future__ import annotations

from typing import Any

from lego_rl.data import Sampling
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
    tok = component.tokenizer
    text = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    ids = tok.encode(text, add_special_tokens=False)
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


@contract("trainer", "structure")
def trainer_structure(component: Any, env: ContractEnv) -> None:
    """it has the Trainer shape and a well-formed preflight"""
    satisfies_protocol(component, "trainer")
    problems(component)
