"""The interface of every plugin kind, as typing Protocols, plus the small types they exchange.

Plugins satisfy these structurally; nothing here is meant to be subclassed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from lego_rl.data import Generation, Sampling, Termination, TrialResult

if TYPE_CHECKING:
    from lego_rl.engine.context import RunContext

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


def first_fatal(problems: Iterable[Problem]) -> Problem | None:
    return next((p for p in problems if p.fatal), None)
