"""Options of the Claude Code harness (the spec's ``harness.options`` block)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ClaudeCodeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_turns: int | None = Field(None, ge=1)
    """Agent turns before Claude Code stops with ``error_max_turns`` (its ``--max-turns``);
    default: the spec's ``run.max_turns``."""
    command: str | None = None
    """The ``claude`` executable: a path (relative to the spec file) or a name on PATH.
    Default: the native binary that ``npm ci`` put into this distribution's node_modules."""
    version: str | None = None
    """The Claude Code version the spec was written for, whole or as a prefix (``"2.1"``);
    preflight fails when the npm-installed CLI is another one (not checked with ``command``)."""
    bare: bool = False
    """``--bare``: minimal mode (no hooks, plugins, CLAUDE.md discovery; fewer tools)."""
    tools: list[str] | None = None
    """``--tools``: the built-in tools to offer (e.g. ``[Bash, Read, Edit]``); default: all."""
    extra_args: list[str] = Field(default_factory=list)
    """More documented CLI flags, appended as given (e.g. ``[--effort, low]``)."""
    extra_env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the Claude Code process (and its tools)."""
    timeout: float | None = Field(None, gt=0)
    """Seconds for the whole agent run; overrides the trial's agent timeout."""
    retries: int = Field(0, ge=0)
    """Retries of a failed model call (``CLAUDE_CODE_MAX_RETRIES``); 0 so a broken proxy
    fails the trial fast."""
