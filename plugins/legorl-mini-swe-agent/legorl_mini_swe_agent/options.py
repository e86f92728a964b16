"""Options of the mini-swe-agent harness (the spec's ``harness.options`` block)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class MiniSweAgentOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_turns: int | None = Field(None, ge=1)
    """Model calls before mini-swe-agent stops with LimitsExceeded (its ``agent.step_limit``);
    default: the spec's ``run.max_turns``."""
    command: str | None = None
    """The ``mini`` executable: a path (relative to the spec file) or a name on PATH.
    Default: the ``mini`` beside this Python interpreter."""
    model_prefix: str = "openai/"
    """litellm provider prefix put before the served model name (e.g. ``hosted_vllm/``)."""
    extra_env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the mini-swe-agent process (and its bash commands)."""
    timeout: float | None = Field(None, gt=0)
    """Seconds for the whole agent run; overrides the trial's agent timeout."""
    command_timeout: int = Field(60, ge=1)
    """Seconds one bash command of the agent may run (its ``environment.timeout``)."""
    retries: int = Field(0, ge=0)
    """Retries of a failed model call; 0 so a broken proxy fails the trial fast."""
    config: dict[str, Any] = Field(default_factory=dict)
    """mini-swe-agent config merged over ours, e.g. ``{agent: {system_template: ...}}``."""
