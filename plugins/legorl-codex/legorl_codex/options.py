"""Options of the Codex harness (the spec's ``harness.options`` block)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class CodexOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    """The ``codex`` executable: a path (relative to the spec file) or a name on PATH.
    Default: the native binary that ``npm ci`` put into this distribution's node_modules."""
    extra_args: list[str] = Field(default_factory=list)
    """More documented ``codex exec`` flags, appended as given."""
    extra_env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the Codex process (and its commands)."""
    timeout: float | None = Field(None, gt=0)
    """Seconds for the whole agent run; overrides the trial's agent timeout."""
    retries: int = Field(0, ge=0)
    """Retries of a failed or broken model call (the provider's ``request_max_retries`` and
    ``stream_max_retries``); 0 so a broken proxy fails the trial fast."""
    instructions: str | None = None
    """Replaces Codex's built-in base instructions (its ``model_instructions_file``): the text,
    written to the run's CODEX_HOME. For small policies whose context budget is the cost."""
    config: dict[str, Any] = Field(default_factory=dict)
    """Codex ``config.toml`` keys merged over ours, e.g. ``{model_reasoning_effort: low}``."""
