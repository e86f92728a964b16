"""The ``agent_settings.json`` of one run: the OpenHands agent the CLI loads, reduced to its LLM.

The CLI fills in the rest itself (tools, skills, system prompt); without a ``condenser`` entry
it never summarises the history with extra model calls.
"""

from __future__ import annotations

from typing import Any

from lego_rl.harness_kit import deep_merge
from lego_rl.kinds import Endpoint
from legorl_openhands.options import OpenHandsOptions


def build_settings(options: OpenHandsOptions, endpoint: Endpoint, timeout: float) -> dict[str, Any]:
    """The agent settings: the model on the proxy session, no retries, no provider extras."""
    llm: dict[str, Any] = {
        "model": options.model_prefix + endpoint.model,
        "base_url": endpoint.base_url.rstrip("/") + "/v1",
        "api_key": endpoint.api_key,
        "usage_id": "agent",
        # Attempts in all (tenacity's stop_after_attempt), so 1 + retries.
        "num_retries": 1 + options.retries,
        "timeout": max(1, int(timeout)),
        "reasoning_effort": None,
        "caching_prompt": False,
    }
    return {"llm": deep_merge(llm, options.llm)}
