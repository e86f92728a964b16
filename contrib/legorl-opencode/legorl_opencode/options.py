"""Options of the OpenCode harness (the spec's ``harness.options`` block)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class OpenCodeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    """The ``opencode`` executable: a path (relative to the spec file) or a name on PATH.
    Default: the native binary that ``npm ci`` put into this distribution's node_modules."""
    agent: str = "build"
    """The primary agent to run (``--agent``): ``build`` (all tools) or ``plan`` (read-only)."""
    extra_args: list[str] = Field(default_factory=list)
    """More documented ``opencode run`` flags, appended as given (e.g. ``[--variant, low]``)."""
    extra_env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the OpenCode process (and its commands)."""
    timeout: float | None = Field(None, gt=0)
    """Seconds for the whole agent run; overrides the trial's agent timeout."""
    config: dict[str, Any] = Field(default_factory=dict)
    """``opencode.json`` keys merged over ours, e.g. ``{agent: {build: {steps: 20}}}``."""
