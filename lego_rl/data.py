"""The data model shared by every pillar: calls, segments, trajectories, trial results.

All types are pydantic models so they serialise to JSON for the run store unchanged.
Routing is stored per token as ``layers x k`` expert indices (``None`` where unknown).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from lego_rl.token_ids import TokenIds

Routing = list[list[int]]
"""Experts one token was routed to: one list of top-k expert ids per MoE layer."""


class Termination(StrEnum):
    """Why a trial ended (each one's meaning: :data:`TERMINATION_WHY`)."""

    COMPLETED = "completed"
    MAX_TURNS = "max_turns"
    AGENT_TIMEOUT = "agent_timeout"
    HARNESS_CRASH = "harness_crash"
    API_ERROR = "api_error"
    CONTEXT_OVERFLOW = "context_overflow"
    OUTPUT_LIMIT = "output_limit"
    RESOURCE_LIMIT = "resource_limit"
    SANDBOX_ERROR = "sandbox_error"
    VERIFIER_TIMEOUT = "verifier_timeout"
    VERIFIER_ERROR = "verifier_error"
    TASK_ERROR = "task_error"
    CHEAT_BLOCKED = "cheat_blocked"
    INTERNAL_ERROR = "internal_error"
    CANCELLED = "cancelled"


TERMINATION_WHY: dict[Termination, str] = {
    Termination.COMPLETED: "The agent ended on its own and the verifier gave its verdict: the "
    "reward is that verdict.",
    Termination.MAX_TURNS: "The agent used up its model calls (the run's max_calls, the "
    "harness's turn limit): how the policy spent them.",
    Termination.AGENT_TIMEOUT: "The agent phase ran past the task's [agent] timeout_sec: the "
    "policy's actions took that long.",
    Termination.HARNESS_CRASH: "The harness (the agent's CLI) crashed, was missing or ended "
    "without a result: our integration of it failed.",
    Termination.API_ERROR: "A model call through the proxy failed (inference backend or proxy) "
    "and the harness gave up: our serving failed.",
    Termination.CONTEXT_OVERFLOW: "The conversation outgrew the model's context window: the "
    "policy's own length.",
    Termination.OUTPUT_LIMIT: "A reply ran to the per-call output-token limit and the harness "
    "gave up on it: the policy's own length, often a reply repeating itself.",
    Termination.RESOURCE_LIMIT: "The trial's commands ran into a sandbox resource limit "
    "(memory, processes, disk, CPU, the crossing budget): what the agent's code did.",
    Termination.SANDBOX_ERROR: "The sandbox failed to start, run a check or stop, or hung past "
    "the watchdog outside the agent phase: our machinery.",
    Termination.VERIFIER_TIMEOUT: "The task's tests ran past their timeout on the agent's code, "
    "in a pristine copy where only its change differs.",
    Termination.VERIFIER_ERROR: "The tests ran on the agent's code but gave no valid verdict (no "
    "or a bad reward file or report): what that code caused.",
    Termination.TASK_ERROR: "The task itself cannot be verified (no test script, a bad task "
    "table): the task set is broken, not the policy.",
    Termination.CHEAT_BLOCKED: "An anti-cheat policy found a violation in what the agent did or "
    "left behind: reward 0.",
    Termination.INTERNAL_ERROR: "A bug in the engine, or a verifier that raised instead of "
    "giving a verdict: ours.",
    Termination.CANCELLED: "The engine stopped the trial (the run ended, or it became too stale "
    "to train): nobody's fault; never trained, counted or retried.",
}
"""One line per termination: what happened, and so whose it is (``docs/terminations.md`` and
the run report are generated from it)."""


class Attribution(StrEnum):
    """Whose fault a non-completed trial is: the policy's own behaviour or our infrastructure."""

    POLICY = "policy"
    INFRASTRUCTURE = "infrastructure"
    NONE = "none"


ATTRIBUTION_EFFECT: dict[Attribution, str] = {
    Attribution.POLICY: "trained on with the verifier's reward where it ran (0 where it did not "
    "or the trial was blocked), never retried",
    Attribution.INFRASTRUCTURE: "retried up to run.retries times, never trained on, not "
    "counted in held-out success",
    Attribution.NONE: "nobody's fault: a completed trial is trained on with its reward, a "
    "cancelled one dropped",
}
"""What the engine does with a trial of each attribution."""


POLICY_TERMINATIONS = frozenset(
    {
        Termination.COMPLETED,
        Termination.MAX_TURNS,
        Termination.AGENT_TIMEOUT,
        Termination.CONTEXT_OVERFLOW,
        Termination.OUTPUT_LIMIT,
        Termination.RESOURCE_LIMIT,
        Termination.CHEAT_BLOCKED,
        Termination.VERIFIER_TIMEOUT,
        Termination.VERIFIER_ERROR,
    }
)
"""Endings the policy's own behaviour causes: reward 0, trained, never retried. Verification
runs the task's checked tests in a fresh copy where only the agent's change differs, so a
verifier that hangs or gives no valid verdict there does so because of the agent's code; only
our own machinery's failures (sandbox, engine, a broken task) are infrastructure."""


def attribute(termination: Termination) -> Attribution:
    """Default attribution of a termination reason."""
    if termination in (Termination.COMPLETED, Termination.CANCELLED):
        return Attribution.NONE
    if termination in POLICY_TERMINATIONS:
        return Attribution.POLICY
    return Attribution.INFRASTRUCTURE


class SandboxFailure(RuntimeError):
    """Raised by a sandbox whose environment broke under a trial (its container killed from
    outside, its daemon gone): the trial ends ``sandbox_error`` (infrastructure) in whatever
    phase it was, never as the harness's or the verifier's failure."""


class ResourceExhausted(RuntimeError):
    """Raised by a sandbox when the agent's own resource use (a storage quota it filled, ...)
    stops one of its operations: the trial ends ``resource_limit`` (the policy's) in whatever
    phase it was. The message starts with the limit and its value (``storage_mb=64 (...)``)."""


def termination_rows() -> list[tuple[Termination, Attribution, str]]:
    """Every termination, in order, with its attribution and why (``docs/terminations.md``)."""
    return [(t, attribute(t), TERMINATION_WHY[t]) for t in Termination]


class Sampling(BaseModel):
    """Sampling parameters of one generation."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 256
    stop_token_ids: list[int] = Field(default_factory=list)
    stop: list[str] = Field(default_factory=list)
    """Stop strings: the reply ends where the first appears (the proxy enforces them; a backend
    may stop there itself)."""
    seed: int | None = None


ABORTED = "abort"
"""``Generation.finish_reason`` of a generation stopped on request before it ended
(:class:`lego_rl.kinds.AbortsGenerations`): the tokens drawn until then."""
CLIENT_DISCONNECT = "client_disconnect"
"""``CallRecord.finish_reason`` of a call whose client went away before its reply was sent
whole: its generation was cut (or never reached anyone), so it is kept for audit and never
trained as a reply (:func:`lego_rl.proxy.recorder.kept_calls` rolls it back)."""


class Generation(BaseModel):
    """What the inference backend returns for one prompt."""

    completion_ids: list[int]
    logprobs: list[float]
    routing: list[Routing] | None = None
    """Per completion token, the experts it was routed to (None for dense models)."""
    prompt_routing: list[Routing] | None = None
    """Per prompt token, the experts it was routed to at prefill (None if not captured)."""
    finish_reason: str = "stop"
    policy_version: int = 0


class CallRecord(BaseModel):
    """One model call through the proxy."""

    session: str
    index: int
    dialect: str
    model: str = ""
    prompt_ids: TokenIds
    completion_ids: TokenIds
    logprobs: tuple[float, ...]
    routing: list[Routing] | None = None
    prompt_routing: list[Routing] | None = None
    finish_reason: str = "stop"
    """The backend's (stop, length), or :data:`CLIENT_DISCONNECT` for a call cut by its client."""
    extends_previous: bool = False
    """True when prompt_ids start with the previous call's prompt + completion exactly."""
    boundary: str | None = None
    """Otherwise (after a first call), how the prompt continues that context
    (:mod:`lego_rl.proxy.boundary`): a drift at the turn boundary (``whitespace``,
    ``special_token``, ``thinking``), a ``rewrite`` of the history, or a ``retry``."""
    boundary_tokens: int = 0
    """Tokens of the previous prompt + completion this prompt does not reproduce."""
    boundary_sampled: int = 0
    """Of those, tokens the previous call sampled."""
    policy_version: int = 0
    started_at: float = 0.0
    ended_at: float = 0.0
    error: str | None = None
    subagent: bool = False
    dropped_tools: list[str] = Field(default_factory=list)
    """Tools the harness offered that the policy did not see (a dialect's ``hosted_tools:
    drop``), each as ``type`` or ``type:name``."""


class Segment(BaseModel):
    """A contiguous token sequence for training, aligned position by position."""

    ids: list[int] = Field(default_factory=list)
    loss_mask: list[int] = Field(default_factory=list)
    """1 only where the token was sampled by the inference backend."""
    logprobs: list[float] = Field(default_factory=list)
    """Sampled log-prob at mask-1 positions, 0.0 elsewhere."""
    routing: list[Routing | None] = Field(default_factory=list)
    calls: list[int] = Field(default_factory=list)
    """Indices of the CallRecords this segment was assembled from."""

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def trained_tokens(self) -> int:
        return sum(self.loss_mask)


class Trajectory(BaseModel):
    """The token-exact training material of one agent session."""

    session: str
    segments: list[Segment] = Field(default_factory=list)
    subagent: bool = False
    rolled_back: list[int] = Field(default_factory=list)
    """Calls whose generation was discarded because the harness retried them."""

    @property
    def trained_tokens(self) -> int:
        return sum(s.trained_tokens for s in self.segments)


class PhaseTiming(BaseModel):
    phase: str
    seconds: float


class TrialResult(BaseModel):
    """Outcome of one trial (one rollout of one task)."""

    trial_id: str
    task: str
    group: str = ""
    step: int = 0
    reward: float = 0.0
    termination: Termination = Termination.COMPLETED
    attribution: Attribution = Attribution.NONE
    reason: str = ""
    """Human-readable detail of why the trial ended (error text, exit code...)."""
    verifier: dict[str, Any] = Field(default_factory=dict)
    harness: dict[str, Any] = Field(default_factory=dict)
    timings: list[PhaseTiming] = Field(default_factory=list)
    trajectory: Trajectory | None = None
    """The main agent's token-exact training material."""
    subagents: list[Trajectory] = Field(default_factory=list)
    """Sub-agent sessions of the same trial (flagged, trained or dropped per ``run.subagents``)."""
    fidelity: list[dict[str, float]] = Field(default_factory=list)
    """Per trajectory (main first): segments, calls, trained tokens, sampled share, rewrites..."""
    call_versions: list[tuple[int, int]] = Field(default_factory=list)
    """(policy version, sampled tokens) of every generated call, in order."""
    calls: int = 0

    def trajectories(self, *, subagents: bool) -> list[Trajectory]:
        """What a trainer learns from: the main agent's trajectory, then (``subagents``) those of
        the sub-agents it started."""
        main = [self.trajectory] if self.trajectory is not None else []
        return main + (self.subagents if subagents else [])
