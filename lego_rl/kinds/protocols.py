"""The Protocol of every plugin kind, in pipeline order.

Plugins satisfy these structurally; nothing here is meant to be subclassed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from lego_rl.data import Generation, Sampling, TrialResult
from lego_rl.kinds.values import (
    ChatCompletion,
    ChatRequest,
    Endpoint,
    Event,
    ExecResult,
    HarnessResult,
    Problem,
    Task,
    VerifierResult,
    Violation,
)

if TYPE_CHECKING:
    from lego_rl.kinds.context import RunContext


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


@runtime_checkable
class TaskSource(Protocol):
    def tasks(self) -> list[Task]: ...


@runtime_checkable
class Sandbox(Protocol):
    """One started, isolated trial environment. A method that cannot go on raises
    :class:`lego_rl.data.SandboxFailure` when the environment broke under the trial (ours:
    ``sandbox_error``), :class:`lego_rl.data.ResourceExhausted` when the agent's own resource
    use stopped it (the policy's: ``resource_limit``)."""

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
