"""The interface of every plugin kind, as typing Protocols, plus the small types they exchange.

Plugins satisfy these structurally; nothing here is meant to be subclassed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, runtime_checkable

from pydantic import BaseModel, Field

from lego_rl.data import Generation, Sampling, Termination, TrialResult
from lego_rl.spec.models import Spec, WarmstartSpec

if TYPE_CHECKING:
    from lego_rl.proxy.toolcalls import StreamEvent
    from lego_rl.registry import BuildContext

KINDS: tuple[str, ...] = (
    "tasks",
    "sandbox",
    "harness",
    "dialect",
    "verifier",
    "anticheat",
    "filter",
    "optimizer",
    "inference",
    "trainer",
    "observer",
)
"""Every plugin kind, in pipeline order."""


# ---------------------------------------------------------------- shared small types


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


class EngineExtras(TypedDict, total=False):
    """What the engine adds to a :class:`RunContext` (absent when no engine runs the loop, as
    in a trainer's own tests)."""

    rollout_metrics: Callable[[], dict[str, float]]
    """The latest rollout's metrics (trainer wait fraction, slot wait, trials in flight,
    version lag, inference busy share, informative group share), to merge into the step event."""
    resume_from: Path | None
    """The checkpoint directory this run continues from; None for a fresh run."""


@dataclass
class RunContext:
    """What a :class:`Trainer` receives: the resolved components and a way to roll out a step;
    built by :func:`lego_rl.engine.run.apply`."""

    spec: Spec
    run_dir: Path
    inference: Inference
    optimizer: Optimizer
    filter: Filter
    rollout: Callable[[int], list[Group]]
    """Run every trial of one step (tasks_per_step x group_size) and return the groups."""
    emit: Callable[[Event], None]
    """Send an event to every observer (the run store included)."""
    log: Callable[[str], None] = print
    """A line for the person watching (per-step summary)."""
    engine_state: Callable[[], dict[str, Any]] = dict
    """The rollout's position (task order, per-task history): saved with a checkpoint."""
    restore_engine: Callable[[dict[str, Any]], None] = lambda state: None
    """Put the rollout back where a checkpoint left it (resume)."""
    extra: EngineExtras = field(default_factory=lambda: EngineExtras())
    """What the engine adds (:class:`EngineExtras`)."""

    def event(self, kind: str, **data: Any) -> None:
        self.emit(Event(kind=kind, data=data, time=time.time()))


# ---------------------------------------------------------------- plugin kinds


@runtime_checkable
class TaskSource(Protocol):
    def tasks(self) -> list[Task]: ...


@runtime_checkable
class Sandbox(Protocol):
    """One started, isolated trial environment."""

    workdir: str
    """The task repository as the agent sees it (e.g. /app)."""

    def exec(
        self,
        command: str,
        *,
        timeout: float,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult: ...

    def upload(self, src: Path, dst: str) -> None: ...

    def download(self, src: str, dst: Path) -> None: ...

    def endpoint_url(self, host_url: str) -> str:
        """The URL under which a host-side server at host_url is reachable from inside."""
        ...

    def stop(self) -> None: ...


@runtime_checkable
class SandboxBackend(Protocol):
    def preflight(self) -> list[Problem]: ...

    def start(self, task: Task, trial_id: str) -> Sandbox: ...


@runtime_checkable
class Harness(Protocol):
    dialect: str
    """The API dialect the harness speaks (a dialect plugin name)."""

    def preflight(self) -> list[Problem]: ...

    def run(self, sandbox: Sandbox, task: Task, endpoint: Endpoint, timeout: float) -> HarnessResult: ...


@runtime_checkable
class Dialect(Protocol):
    """One model API served on the proxy. Routes are relative to the session root."""

    name: str
    routes: Sequence[tuple[str, str]]
    """(method, path) pairs, e.g. ("POST", "/v1/chat/completions")."""

    def parse(self, body: dict[str, Any]) -> ChatRequest:
        """Request body -> neutral request; raises lego_rl.proxy.errors.BadRequest."""
        ...

    def format(self, request: ChatRequest, completion: ChatCompletion, call_id: str) -> dict[str, Any]: ...

    def error(self, status: int, message: str, kind: str) -> dict[str, Any]:
        """An error body in the dialect's own shape."""
        ...


@runtime_checkable
class Verifier(Protocol):
    def score(self, sandbox: Sandbox, task: Task) -> VerifierResult: ...


@runtime_checkable
class AntiCheat(Protocol):
    """Phase hooks. A policy whose phase is one shell check may also offer
    ``before_agent_check(sandbox, task) -> Check | None`` (and ``before_verify_check``): the
    engine then calls that instead of the hook and batches the checks (one exec per phase)."""

    name: str

    def before_agent(self, sandbox: Sandbox, task: Task) -> list[Violation]: ...

    def before_verify(self, sandbox: Sandbox, task: Task) -> list[Violation]: ...

    def after(self, sandbox: Sandbox, task: Task, result: TrialResult) -> list[Violation]: ...


@runtime_checkable
class Filter(Protocol):
    def select_tasks(self, tasks: list[Task]) -> list[Task]: ...

    def keep_group(self, group: list[TrialResult]) -> bool: ...


@runtime_checkable
class Optimizer(Protocol):
    """An objective over groups of trajectories (torch tensors in, scalar loss out)."""

    def advantages(self, group: list[TrialResult]) -> list[float]: ...

    def loss(self, batch: Any) -> tuple[Any, dict[str, float]]:
        """batch: an optimizer-specific token batch; returns (loss tensor, metrics)."""
        ...


@runtime_checkable
class Inference(Protocol):
    tokenizer: Any
    """A Hugging Face tokenizer with the model's chat template."""

    policy_version: int

    def generate(
        self,
        prompt_ids: Sequence[int],
        sampling: Sampling,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Generation:
        """Sample a completion of ``prompt_ids`` (the call's recorded ids, not to be copied
        needlessly: a long context is a large container the garbage collector walks). ``on_token(id, logprob)`` is called as each token is sampled
        (from the generating thread), so the proxy can stream it to the harness."""
        ...

    def preflight(self) -> list[Problem]: ...


@runtime_checkable
class Trainer(Protocol):
    def preflight(self) -> list[Problem]: ...

    def run(self, ctx: RunContext) -> None: ...


@runtime_checkable
class Observer(Protocol):
    def emit(self, event: Event) -> None: ...

    def close(self) -> None: ...


# ---------------------------------------------------------------- optional capabilities

RESULTS_FD_ENV = "LEGORL_RESULTS_FD"
"""The variable naming the descriptor of a :class:`ResultStream` command's result stream."""


@runtime_checkable
class PristineVerify(Protocol):
    """A sandbox whose verification runs in a fresh copy of the task's starting state, with
    only the agent's crossing changes applied (:mod:`lego_rl.crossing`)."""

    def begin_agent(self) -> None:
        """Seal the starting state as it is now (the trial runner calls this after the
        before-agent checks): the agent's change is counted from it, verification starts from it."""
        ...

    def begin_verify(self, task: Task) -> dict[str, Any]:
        """End the agent phase and switch to the verification copy; what to record of it
        (``crossing``: what crossed and what was dropped). Raises
        :class:`lego_rl.crossing.CrossingLimit` when the agent changed too much."""
        ...


@runtime_checkable
class ResultStream(Protocol):
    """A sandbox that gives a command a result stream nothing inside can open by path."""

    def exec_reporting(
        self, command: str, *, timeout: float, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> tuple[ExecResult, str]:
        """``exec`` with the stream open as the descriptor ``$LEGORL_RESULTS_FD``; the
        execution and the stream's text."""
        ...


@runtime_checkable
class ProvidesFiles(Protocol):
    """A sandbox that can show host paths read-only (a bind) instead of copies by upload."""

    def provide(self, paths: Sequence[Path]) -> None:
        """Show ``paths`` at their own paths in the agent phase, from the next command on."""
        ...


class ChangedPath(Protocol):
    """One path the agent changed: in-sandbox ``path``, ``kind`` added | modified | deleted."""

    @property
    def path(self) -> str: ...

    @property
    def kind(self) -> str: ...


@runtime_checkable
class ReportsChanges(Protocol):
    """A sandbox that knows what the agent changed (from its snapshot) and where it can write."""

    def changes(self) -> Sequence[ChangedPath]: ...

    def writable_roots(self) -> list[str]:
        """The in-sandbox paths that persist and that the agent can write."""
        ...


@runtime_checkable
class KillsCommands(Protocol):
    """A sandbox that can kill every command still running in it (and all they started)."""

    def kill_all(self) -> int:
        """Kill them; how many there were."""
        ...


@runtime_checkable
class ListsProcesses(Protocol):
    """A sandbox that can list the host pids of its trial's processes still alive."""

    def processes(self, settle: float = 2.0) -> list[int]: ...


@runtime_checkable
class ReportsLimits(Protocol):
    """A sandbox that reports the resource limits its commands ran into."""

    def resources_exhausted(self) -> list[dict[str, str]]:
        """One entry per limit hit: ``phase`` (agent | verify), ``limit`` (``name=value``), ``detail``."""
        ...


@runtime_checkable
class HarnessFiles(Protocol):
    """A harness that runs files of the host (its pinned CLI, its runtime) in the sandbox."""

    def sandbox_files(self) -> list[Path]:
        """Host paths the harness needs inside, read-only, at their own paths."""
        ...


@runtime_checkable
class AbortsGenerations(Protocol):
    """An inference backend that can stop a generation in progress: the proxy's client went
    away, and tokens nobody will read would hold the backend's slot until ``max_tokens``."""

    def generate_abortable(
        self,
        prompt_ids: Sequence[int],
        sampling: Sampling,
        abort: threading.Event,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Generation:
        """:meth:`Inference.generate`, ended once ``abort`` is set (seen before the next token
        at the latest; a generation not started yet does not start): the tokens drawn until
        then, with ``finish_reason`` :data:`lego_rl.data.ABORTED`, and the backend's slot free
        when it returns. A generation that ended on its own first is returned as it ended."""
        ...


# ---------------------------------------------------------------- any kind


@runtime_checkable
class Preflights(Protocol):
    """A plugin of a kind whose Protocol has no ``preflight`` (tasks, dialect, verifier,
    anticheat, filter, optimizer, observer) that checks its prerequisites all the same:
    ``legorl plan`` shows what it returns."""

    def preflight(self) -> list[Problem]: ...


# ---------------------------------------------------------------- dialect capabilities


@runtime_checkable
class StreamFormatter(Protocol):
    """One streamed reply in a dialect's SSE events. Each method returns SSE text ('' for none)."""

    def start(self, prompt_tokens: int) -> str: ...

    def event(self, event: StreamEvent) -> str: ...

    def finish(self, completion: ChatCompletion) -> str: ...

    def fail(self, status: int, message: str, kind: str) -> str:
        """The stream broke after it started (the backend failed mid-generation)."""
        ...


@runtime_checkable
class StreamingDialect(Protocol):
    """A dialect that streams replies: the proxy feeds the formatter the parser's events as
    tokens are sampled and writes its SSE text straight to the client (without it, a request
    asking to stream is refused with a 400)."""

    def stream(self, request: ChatRequest, call_id: str) -> StreamFormatter: ...


@runtime_checkable
class ParsesBodies(Protocol):
    """A dialect that reads a request from the body's bytes (faster than JSON, then parse)."""

    def parse_body(self, body: bytes, scope: str = "") -> ChatRequest | None:
        """The request ``body`` holds, as :meth:`Dialect.parse` would read it, reading only what
        earlier bodies of ``scope`` (the session) did not have; None: the proxy falls back to
        JSON and ``parse``."""
        ...


@runtime_checkable
class CountsTokens(Protocol):
    """A dialect whose API has a token-counting route; the proxy answers it with
    ``{"input_tokens": n}``, the prompt the request would render to, nothing generated."""

    count_tokens_route: tuple[str, str]
    """(method, path) under the session root, e.g. ("POST", "/v1/messages/count_tokens")."""


@runtime_checkable
class MakesConformanceRequest(Protocol):
    """A dialect with no official SDK in the kit writes its own request for the round trip."""

    def conformance_request(self, text: str) -> tuple[str, dict[str, Any]]:
        """The path of one of its routes and a body in its API's shape asking, non-streamed,
        for a reply to the user message ``text``."""
        ...


# ---------------------------------------------------------------- harness capabilities


@runtime_checkable
class SpeaksDialect(Protocol):
    """A harness factory (its class) that names its dialect before it is built, so a spec
    whose dialect block disagrees fails validation, not the first call."""

    dialect: str


@runtime_checkable
class ScriptsConformance(Protocol):
    """A harness the scripted policy can drive: its contracts' trials and the warm start's
    demonstrations."""

    def conformance_script(self, commands: list[str]) -> list[dict[str, Any]]:
        """The policy turns (``{"text"}`` and/or ``{"tool_calls"}``, in the harness's own tools)
        that run ``commands`` in the task's working directory, then finish."""
        ...


# ---------------------------------------------------------------- inference capabilities


@runtime_checkable
class LoadsWeights(Protocol):
    """An inference backend the trainer updates in place (else the policy never changes)."""

    def load_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """Serve ``state_dict`` from the next generation on; ``policy_version`` becomes ``version``."""
        ...


@runtime_checkable
class RestoresRngState(Protocol):
    """An inference backend whose sampling randomness a checkpoint saves and a resume restores."""

    def get_rng_state(self) -> Any: ...

    def set_rng_state(self, state: Any) -> None:
        """From now on, sample as the backend did when ``get_rng_state`` returned ``state``."""
        ...


@runtime_checkable
class HoldsResources(Protocol):
    """A component that holds something to release when the run ends (a server it launched)."""

    def close(self) -> None: ...


# ---------------------------------------------------------------- trainer, optimizer, filter, anti-cheat


@runtime_checkable
class Supervises(Protocol):
    """A trainer that can warm-start the policy (``model.warmstart``) by supervised training."""

    def supervise(
        self, demos: list[Any], plan: WarmstartSpec, target: Path, log: Callable[[str], None]
    ) -> dict[str, float]:
        """Fine-tune on ``demos`` (recorded demonstrations) as ``plan`` says, save the model
        to ``target``; its metrics."""
        ...


@runtime_checkable
class OwnsRollout(Protocol):
    """A trainer that runs its own rollouts (verl: its servers, its agent loop, our trials in
    its workers): ``apply`` builds no inference, proxy or pool for it, and its
    :class:`RunContext` has neither inference nor rollout.

    A marker, so the member is typed ``Literal[True]``: declaring it is the claim (the
    ``trainer.owns-rollout`` contract fails a trainer that sets it to anything else)."""

    owns_rollout: Literal[True]


@runtime_checkable
class UsesReference(Protocol):
    """An objective that may need the reference policy's log-probs (a KL penalty)."""

    @property
    def needs_reference(self) -> bool:
        """Whether :meth:`Optimizer.loss` needs ``ref_logprobs`` in its batch with these options."""
        ...


@runtime_checkable
class ResamplesGroups(Protocol):
    """A filter that drops groups online, so the pool samples replacements."""

    resample_budget: float
    """Extra groups per step the pool may sample, as a share of ``tasks_per_step``."""


@runtime_checkable
class ChecksBeforeAgent(Protocol):
    """An anti-cheat policy whose before-agent phase is one shell check: the engine runs it
    with the other policies' checks in one exec instead of calling ``before_agent``."""

    def before_agent_check(self, sandbox: Sandbox, task: Task) -> Check | None: ...


@runtime_checkable
class ChecksBeforeVerify(Protocol):
    """As :class:`ChecksBeforeAgent`, for the before-verify phase (``before_verify``)."""

    def before_verify_check(self, sandbox: Sandbox, task: Task) -> Check | None: ...


# ---------------------------------------------------------------- factory capabilities


@runtime_checkable
class PlanDetails(Protocol):
    """A plugin factory that adds to ``legorl plan`` (the verl trainer: its resolved config)."""

    def plan_details(self, options: Any, ctx: BuildContext) -> dict[str, Any]: ...


@runtime_checkable
class TrialsRoot(Protocol):
    """A sandbox backend that keeps its trials' directories under one host directory."""

    root: Path


def first_fatal(problems: Iterable[Problem]) -> Problem | None:
    return next((p for p in problems if p.fatal), None)
