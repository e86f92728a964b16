"""The small values plugin kinds exchange: tasks, results, requests, completions, events."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from lego_rl.data import Sampling, Termination, TrialResult


@dataclass(frozen=True)
class Problem:
    """A preflight finding: what is wrong and how to fix it."""

    message: str
    fix: str = ""
    fatal: bool = True

    def __str__(self) -> str:
        return f"{self.message} ({self.fix})" if self.fix else self.message


class Task(BaseModel):
    """One task in Harbor format (task.toml, instruction.md, environment/, tests/, solution/)."""

    name: str
    path: Path
    instruction: str
    config: dict[str, Any] = Field(default_factory=dict)
    """Parsed task.toml."""

    @property
    def agent_timeout(self) -> float:
        return float(self.config.get("agent", {}).get("timeout_sec", 600.0))

    @property
    def verifier_timeout(self) -> float:
        return float(self.config.get("verifier", {}).get("timeout_sec", 600.0))

    @property
    def oracle_commands(self) -> list[str]:
        """The oracle as shell commands: ``[metadata] oracle_commands`` (a list) or
        ``oracle_command`` (one); [] if it has neither (the warm start's demonstrations and
        evaluation's constant-answer baseline read it)."""
        metadata = self.config.get("metadata", {})
        commands = metadata.get("oracle_commands", [metadata["oracle_command"]] if "oracle_command" in metadata else [])
        return [str(c) for c in commands] if isinstance(commands, list) else []

    @property
    def candidate_commands(self) -> list[str]:
        """``[metadata] candidate_commands``: fixes the instruction offers, one of them the
        oracle's (the warm start's checking demonstrations try them); [] if none."""
        commands = self.config.get("metadata", {}).get("candidate_commands", [])
        return [str(c) for c in commands] if isinstance(commands, list) else []

    @property
    def check_command(self) -> str | None:
        """``[metadata] check_command``: the command that runs the tests the agent may see."""
        command = self.config.get("metadata", {}).get("check_command")
        return str(command) if command else None


@dataclass
class ExecResult:
    """Result of one command run inside a sandbox."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    seconds: float = 0.0


@dataclass(frozen=True)
class Endpoint:
    """Where a harness inside a sandbox reaches the proxy session."""

    base_url: str
    """Session root, e.g. http://127.0.0.1:8123/s/<session> (no trailing slash)."""
    api_key: str
    model: str
    small_model: str = ""


@dataclass
class HarnessResult:
    """How the harness run ended, from the harness's own exit and output."""

    termination: Termination
    exit_code: int | None = None
    reason: str = ""
    transcript: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class VerifierResult:
    reward: float
    details: dict[str, Any] = field(default_factory=dict)
    termination: Termination | None = None
    """Set when verification itself failed (timeout, crash)."""


@dataclass(frozen=True)
class Violation:
    """An anti-cheat finding that invalidates the trial."""

    policy: str
    message: str


@dataclass(frozen=True)
class Check:
    """A shell check an anti-cheat policy wants run in the sandbox (cwd ``/``) at a
    phase boundary. The engine runs the checks of one phase together, in one exec, and hands
    each ``judge`` its own stdout; a judge may raise when the policy cannot establish its
    guarantee (the sandbox's fault, not the agent's)."""

    policy: str
    script: str
    judge: Callable[[str], list[Violation]]


@dataclass(frozen=True)
class CheatDemo:
    """A cheat an anti-cheat policy catches, staged by its contract
    (:class:`~lego_rl.kinds.DemonstratesCheat`): a sandbox of the kit's task is started and
    sealed, the policy's before-agent phase runs, ``stage`` puts the cheat in place before
    ``phase`` (before the agent phase for ``before_agent``), and the phase must catch it: a
    violation, a refusal (the phase raises), the cheat undone (``works`` fails afterwards), or,
    for ``after``, a record in the result's verifier details."""

    phase: Literal["before_agent", "before_verify", "after"]
    stage: str = ""
    """Shell run in the sandbox's workdir that commits the cheat."""
    works: str = ""
    """Shell that exits 0 while the cheat is in place; checked right after ``stage`` (a demo
    whose cheat never worked proves nothing) and again after the phase."""
    seen: str | None = None
    """For a guarantee of the sandbox that no agent can stage (loopback only): what the
    phase's shell check reads when the guarantee is broken, fed to its judge instead."""
    verifier: dict[str, Any] = field(default_factory=dict)
    """For ``after``: the verifier's details of the trial the policy is shown."""


@dataclass
class ChatMessage:
    """A dialect-neutral chat message, as the chat template sees it."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """OpenAI shape: {"id", "type": "function", "function": {"name", "arguments": str}}."""
    tool_call_id: str = ""
    name: str = ""


@dataclass
class ChatRequest:
    """A dialect-neutral model request."""

    messages: list[ChatMessage]
    tools: list[dict[str, Any]] = field(default_factory=list)
    """OpenAI function-tool shape: {"type": "function", "function": {name, description, parameters}}."""
    sampling: Sampling = field(default_factory=Sampling)
    model: str = ""
    stream: bool = False
    raw: dict[str, Any] = field(default_factory=dict)
    """The body's top-level fields as parsed JSON (a dialect that reads the body as texts may
    leave out the fields it parsed into the request itself)."""
    dropped_tools: list[str] = field(default_factory=list)
    """Tools of the body the policy does not see (hosted tools a dialect drops), each as
    ``type`` or ``type:name``; recorded on the call."""


@dataclass
class ChatCompletion:
    """The parsed reply of the policy, ready for a dialect to format."""

    content: str
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: Literal["stop", "length", "tool_calls"] = "stop"
    stop_sequence: str | None = None
    """The request's stop string that ended the reply, if one did (not part of ``content``)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Event:
    """One run event for observers and the run store."""

    kind: str
    """run_start, step, trial_start, trial_end, call, run_end, log."""
    data: dict[str, Any]
    time: float = 0.0


Group = list[TrialResult]
"""The trials of one task in one step (a GRPO group), trajectories attached."""


def first_fatal(problems: Iterable[Problem]) -> Problem | None:
    return next((p for p in problems if p.fatal), None)
