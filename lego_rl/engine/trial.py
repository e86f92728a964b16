"""One trial = one rollout: sandbox, anti-cheat, harness through the proxy, verifier.

Whatever goes wrong, a trial ends with a :class:`TrialResult` that says why, and the
records captured so far (calls, trajectory) are kept.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from lego_rl.data import (
    Attribution,
    PhaseTiming,
    Sampling,
    Termination,
    TrialResult,
    attribute,
)
from lego_rl.kinds import (
    AntiCheat,
    Endpoint,
    Event,
    Harness,
    HarnessResult,
    Sandbox,
    SandboxBackend,
    Task,
    Verifier,
    VerifierResult,
    Violation,
)
from lego_rl.proxy.server import ProxyServer
from lego_rl.proxy.session import ProxySession


@dataclass
class TrialSetup:
    """The components every trial of a run shares."""

    sandbox: SandboxBackend
    harness: Harness
    verifier: Verifier
    proxy: ProxyServer
    dialect: str
    model_name: str
    sampling: Sampling
    max_calls: int | None = None
    anticheat: list[AntiCheat] = field(default_factory=list)
    emit: Callable[[Event], None] = lambda event: None


class TrialRunner:
    """Runs single trials; safe to call from several threads at once."""

    def __init__(self, setup: TrialSetup):
        self.setup = setup

    def run(self, task: Task, trial_id: str, *, step: int = 0, group: str = "") -> TrialResult:
        s = self.setup
        result = TrialResult(trial_id=trial_id, task=task.name, group=group, step=step)
        self._emit("trial_start", trial_id=trial_id, task=task.name, step=step, group=group)
        session = s.proxy.open_session(
            trial_id, s.dialect, sampling=s.sampling, max_calls=s.max_calls
        )
        sandbox: Sandbox | None = None
        try:
            with _phase(result, "sandbox_start"):
                sandbox = s.sandbox.start(task, trial_id)
            self._attempt(task, sandbox, session, result)
        except _TrialEnded:
            pass
        except Exception as exc:  # a sandbox that fails to start, or our own bug
            phase = "sandbox" if sandbox is None else "engine"
            _end(
                result,
                Termination.SANDBOX_ERROR if sandbox is None else Termination.INTERNAL_ERROR,
                f"{phase}: {type(exc).__name__}: {exc}",
            )
            result.harness["traceback"] = traceback.format_exc(limit=8)
        finally:
            if sandbox is not None:
                with _phase(result, "sandbox_stop"):
                    try:
                        sandbox.stop()
                    except Exception as exc:
                        result.harness["sandbox_stop_error"] = f"{type(exc).__name__}: {exc}"
            s.proxy.close_session(trial_id)
            result.trajectory = session.trajectory()
            result.calls = len(session.calls)
        result.attribution = (
            Attribution.NONE
            if result.termination == Termination.COMPLETED
            else attribute(result.termination)
        )
        self._emit("trial_end", result=result)
        return result

    def _attempt(
        self, task: Task, sandbox: Sandbox, session: ProxySession, result: TrialResult
    ) -> None:
        s = self.setup
        with _phase(result, "anticheat_before_agent"):
            self._check(result, [v for p in s.anticheat for v in p.before_agent(sandbox, task)])
        endpoint = Endpoint(
            base_url=sandbox.endpoint_url(session.base_url(s.proxy.url)),
            api_key=session.api_key,
            model=s.model_name,
            small_model=s.model_name,
        )
        with _phase(result, "agent"):
            try:
                outcome = s.harness.run(sandbox, task, endpoint, timeout=task.agent_timeout)
            except Exception as exc:
                outcome = HarnessResult(
                    Termination.HARNESS_CRASH, reason=f"{type(exc).__name__}: {exc}"
                )
        _end(result, _termination(outcome, session), outcome.reason)
        result.harness = {
            "exit_code": outcome.exit_code,
            "transcript": outcome.transcript[-20000:],
            **outcome.details,
        }
        with _phase(result, "anticheat_before_verify"):
            self._check(result, [v for p in s.anticheat for v in p.before_verify(sandbox, task)])
        with _phase(result, "verify"):
            try:
                verdict = s.verifier.score(sandbox, task)
            except Exception as exc:
                verdict = VerifierResult(
                    0.0, {"reason": f"{type(exc).__name__}: {exc}"}, Termination.VERIFIER_ERROR
                )
        result.reward = verdict.reward
        result.verifier = verdict.details
        if verdict.termination is not None:
            _end(result, verdict.termination, str(verdict.details.get("reason", "")))
        with _phase(result, "anticheat_after"):
            self._check(result, [v for p in s.anticheat for v in p.after(sandbox, task, result)])

    def _check(self, result: TrialResult, violations: list[Violation]) -> None:
        if violations:
            result.reward = 0.0
            _end(
                result,
                Termination.CHEAT_BLOCKED,
                "; ".join(f"{v.policy}: {v.message}" for v in violations),
            )
            result.verifier["violations"] = [v.__dict__ for v in violations]
            raise _TrialEnded

    def _emit(self, kind: str, **data: object) -> None:
        self.setup.emit(Event(kind=kind, data=data, time=time.time()))


class _TrialEnded(Exception):
    """Raised inside a trial to skip the remaining phases."""


def _termination(outcome: HarnessResult, session: ProxySession) -> Termination:
    """The harness's own verdict, corrected by what the proxy saw."""
    if session.context_overflow:
        return Termination.CONTEXT_OVERFLOW
    if session.limit_hit:
        return Termination.MAX_TURNS
    return outcome.termination


def _end(result: TrialResult, termination: Termination, reason: str) -> None:
    result.termination = termination
    result.reason = reason


@contextmanager
def _phase(result: TrialResult, name: str) -> Iterator[None]:
    start = time.monotonic()
    try:
        yield
    finally:
        result.timings.append(PhaseTiming(phase=name, seconds=time.monotonic() - start))
