"""The mini-swe-agent config file of one run: our settings layered over its ``mini.yaml``."""

from __future__ import annotations

from typing import Any

from lego_rl.harness_kit import deep_merge
from lego_rl.kinds import Endpoint
from legorl_mini_swe_agent.options import MiniSweAgentOptions

TIMEOUT_MARGIN = 0.1
"""Share of the run timeout (at most 10 s) left between mini's own wall-clock limit and the
hard kill, so that it stops by itself and saves its trajectory."""


def build_config(
    options: MiniSweAgentOptions,
    endpoint: Endpoint,
    instruction: str,
    workdir: str,
    timeout: float,
    max_turns: int,
) -> dict[str, Any]:
    """The config mini-swe-agent merges after its built-in ``mini.yaml``."""
    ours: dict[str, Any] = {
        "run": {"task": instruction},
        "agent": {
            "agent_class": "default",
            "step_limit": max_turns,
            "cost_limit": 0,
            "wall_time_limit_seconds": max(1, int(timeout - min(10.0, timeout * TIMEOUT_MARGIN))),
            "max_consecutive_format_errors": 0,
        },
        "model": {
            "model_name": options.model_prefix + endpoint.model,
            "cost_tracking": "ignore_errors",
            "model_kwargs": {
                "api_base": endpoint.base_url.rstrip("/") + "/v1",
                "api_key": endpoint.api_key,
                "max_retries": 0,
                "num_retries": 0,
                "timeout": timeout,
            },
        },
        "environment": {
            "environment_class": "local",
            "cwd": workdir,
            "timeout": options.command_timeout,
        },
    }
    return deep_merge(ours, options.config)
