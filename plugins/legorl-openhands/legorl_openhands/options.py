"""Options of the OpenHands harness (the spec's ``harness.options`` block)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class OpenHandsOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    """The ``openhands`` executable: a path (relative to the spec file) or a name on PATH.
    Default: the one in this distribution's own ``.venv``."""
    model_prefix: str = "hosted_vllm/"
    """litellm provider prefix put before the served model name. ``hosted_vllm/`` sends each
    call once; with ``openai/`` the OpenAI client itself retries a 5xx twice."""
    extra_env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the OpenHands process (and its terminal commands)."""
    timeout: float | None = Field(None, gt=0)
    """Seconds for the whole agent run; overrides the trial's agent timeout."""
    retries: int = Field(0, ge=0)
    """Retries of a failed model call; 0 so a broken proxy fails the trial fast."""
    llm: dict[str, Any] = Field(default_factory=dict)
    """OpenHands LLM settings merged over ours, e.g. ``{max_output_tokens: 4096}``."""
