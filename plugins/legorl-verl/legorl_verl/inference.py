"""Our :class:`~lego_rl.kinds.Inference` on top of verl's LLM server client.

The proxy calls ``generate`` from its own threads; verl's client is a coroutine
(``LLMServerClient.generate(request_id, *, prompt_ids, sampling_params) -> TokenOutput``)
bound to the agent-loop worker's event loop, so each call is scheduled onto that loop and
waited for. ``request_id`` is the trial id: verl routes a trial's calls to one server
(prefix cache). The engine returns its routing for the whole sequence (prompt rows, then one
row per generated token, possibly without the last); a generated token whose row is missing
gets an empty routing (``[]``: unknown).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lego_rl.data import Generation, Routing, Sampling
from lego_rl.kinds import Problem


class VerlServerInference:
    """Generates through verl's rollout servers for one trial."""

    def __init__(
        self,
        client: Any,
        loop: asyncio.AbstractEventLoop,
        tokenizer: Any,
        request_id: str,
        *,
        timeout: float | None = None,
    ):
        self.client, self.loop, self.tokenizer = client, loop, tokenizer
        self.request_id, self.timeout = request_id, timeout
        self.policy_version = 0

    def preflight(self) -> list[Problem]:
        return []

    def generate(
        self,
        prompt_ids: Sequence[int],
        sampling: Sampling,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Generation:
        params = sampling_params(sampling)
        call = self.client.generate(self.request_id, prompt_ids=list(prompt_ids), sampling_params=params)
        output = asyncio.run_coroutine_threadsafe(call, self.loop).result(self.timeout)
        ids = list(output.token_ids)
        if output.stop_reason == "aborted" and not ids:
            raise RuntimeError("verl rollout server aborted the request (weights are being updated)")
        if output.log_probs is None or len(output.log_probs) != len(ids):
            raise RuntimeError(
                "verl rollout server returned no log-prob per token "
                "(actor_rollout_ref.rollout.calculate_log_probs must be true)"
            )
        steps = output.extra_fields.get("max_global_steps")
        if isinstance(steps, int):
            self.policy_version = steps
        if on_token is not None:  # verl's servers do not stream: replay once complete
            for token, logprob in zip(ids, output.log_probs, strict=True):
                on_token(token, logprob)
        prompt_routing, routing = split_routing(output.routed_experts, len(prompt_ids), len(ids))
        stopped = bool(ids) and ids[-1] in _stop_ids(sampling, self.tokenizer)
        return Generation(
            completion_ids=ids,
            logprobs=[float(x) for x in output.log_probs],
            routing=routing,
            prompt_routing=prompt_routing,
            finish_reason="length" if len(ids) >= sampling.max_tokens and not stopped else "stop",
            policy_version=self.policy_version,
        )


def sampling_params(sampling: Sampling) -> dict[str, Any]:
    """Our sampling parameters in the shape verl's servers take (vLLM SamplingParams names)."""
    params: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "max_tokens": sampling.max_tokens,
        "logprobs": True,
        "repetition_penalty": 1.0,
    }
    if sampling.stop_token_ids:
        params["stop_token_ids"] = list(sampling.stop_token_ids)
    if sampling.seed is not None:
        params["seed"] = sampling.seed
    return params


def split_routing(
    routed: Any, prompt_len: int, completion_len: int
) -> tuple[list[Routing] | None, list[Routing] | None]:
    """(prompt routing, completion routing) from the engine's whole-sequence table."""
    if routed is None:
        return None, None
    table = np.asarray(routed)
    if table.ndim != 3:
        raise RuntimeError(f"routed experts of shape {table.shape}, expected (tokens, layers, k)")
    prompt = table[:prompt_len].tolist() if len(table) >= prompt_len else None
    completion: list[Routing] = table[prompt_len : prompt_len + completion_len].tolist()
    completion += [[] for _ in range(completion_len - len(completion))]
    return prompt, completion


def _stop_ids(sampling: Sampling, tokenizer: Any) -> set[int]:
    eos = getattr(tokenizer, "eos_token_id", None)
    return set(sampling.stop_token_ids) | ({eos} if isinstance(eos, int) else set())
