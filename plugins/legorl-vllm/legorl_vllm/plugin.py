"""Entry point of legorl-vllm: registers the ``vllm`` inference (options only at import time;
the HTTP client loads when the backend is built, vLLM itself is never imported)."""

from __future__ import annotations

from typing import Any

from lego_rl import hookimpl
from lego_rl.registry import BuildContext
from legorl_vllm.options import VLLMOptions


def vllm(options: VLLMOptions, ctx: BuildContext) -> Any:
    """A vLLM server (attached or launched): token-id prompts, sampled log-probs, routed experts."""
    from legorl_vllm.inference import factory

    return factory(options, ctx)


@hookimpl
def legorl_register_inference(register: Any) -> None:
    register("vllm", vllm, options=VLLMOptions)
