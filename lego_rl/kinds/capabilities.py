"""Optional capabilities: what a plugin of a kind may also offer, each a runtime-checkable
Protocol, checked with ``isinstance`` (never probed by name)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from lego_rl.data import Generation, Sampling
from lego_rl.kinds.protocols import (
    Sandbox,
)
from lego_rl.kinds.values import (
    ChatCompletion,
    ChatRequest,
    CheatDemo,
    Check,
    ExecResult,
    Problem,
    Task,
)
from lego_rl.spec.models import WarmstartSpec

if TYPE_CHECKING:
    from lego_rl.proxy.toolcalls import StreamEvent
    from lego_rl.registry import BuildContext


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
class ScoresTokens(Protocol):
    """An inference backend that scores given tokens as it samples them (teacher forcing):
    what its contract ``inference.logprobs-are-the-models`` compares generate()'s log-probs
    with. vLLM: prompt log-probs; the embedded model: one forward pass."""

    def score(self, prompt_ids: Sequence[int], completion_ids: Sequence[int], temperature: float = 1.0) -> list[float]:
        """Log-prob of each of ``completion_ids`` given every token before it, under the
        weights generate() samples with now, from the distribution at ``temperature``."""
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
class NeedsInference(Protocol):
    """A trainer that needs its inference backend to offer capabilities (the embedded trainer
    pushes weights: :class:`LoadsWeights`): ``plan`` and ``apply`` refuse a spec whose inference
    lacks one, naming it, before anything starts."""

    inference_needs: tuple[type, ...]
    """Runtime-checkable Protocols the inference component must satisfy."""


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


@runtime_checkable
class DemonstratesCheat(Protocol):
    """An anti-cheat policy that shows a cheat it catches, so its contract
    (``anticheat.catches-its-cheat``) can fail a policy that catches nothing. Every policy
    offers one: a guard that cannot say what it guards against cannot be checked."""

    def cheat_demonstration(self, scratch: Path) -> CheatDemo:
        """A cheat this policy catches (``scratch``: a host directory for files it needs)."""
        ...


@runtime_checkable
class Serves(Protocol):
    """An observer that shows what it saw by serving it (the dashboard) rather than writing
    files: ``url`` answers once it has started (None before), until ``close()``."""

    @property
    def url(self) -> str | None: ...


# ---------------------------------------------------------------- factory capabilities


@runtime_checkable
class PlanDetails(Protocol):
    """A plugin factory that adds to ``legorl plan`` (the verl trainer: its resolved config)."""

    def plan_details(self, options: Any, ctx: BuildContext) -> dict[str, Any]: ...


@runtime_checkable
class TrialsRoot(Protocol):
    """A sandbox backend that keeps its trials' directories under one host directory."""

    root: Path
