"""One trial = one rollout: sandbox, anti-cheat, harness through the proxy, verifier.

Whatever goes wrong, a trial ends with a :class:`TrialResult` that says why, and the
records captured so far (calls, trajectory) are kept. The runner knows the phase each live
trial is in, so the pool's watchdog can end a stuck one (:meth:`TrialRunner.abort`).
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from lego_rl.anticheat_checks import phase_violations
from lego_rl.data import (
    Attribution,
    PhaseTiming,
    ResourceExhausted,
    Sampling,
    SandboxFailure,
    Termination,
    TrialResult,
    attribute,
)
from lego_rl.kinds import (
    AntiCheat,
    Endpoint,
    Event,
    Harness,
    HarnessFiles,
    HarnessResult,
    PristineVerify,
    ProvidesFiles,
    ReportsLimits,
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


@dataclass
class _Live:
    """A trial in progress: its phase, its sandbox, and the verdict if it was aborted."""

    phase: str = "sandbox_start"
    sandbox: Sandbox | None = None
    verdict: TrialResult | None = None


class TrialRunner:
    """Runs single trials; safe to call from several threads at once."""

    def __init__(self, setup: TrialSetup):
        self.setup = setup
        self._live: dict[str, _Live] = {}

    def phase(self, trial_id: str) -> str:
        """The phase a running trial is in ('' if it is not running)."""
        live = self._live.get(trial_id)
        return live.phase if live else ""

    def abort(self, trial_id: str, verdict: TrialResult) -> None:
        """End a running trial as ``verdict``: its sandbox is stopped (which ends the harness
        or verifier blocked in it) and its result takes the verdict's reason."""
        live = self._live.get(trial_id)
        if live is None:
            return
        live.verdict = verdict
        if live.sandbox is not None:
            threading.Thread(target=_stop_quietly, args=(live.sandbox,), daemon=True).start()

    def run(self, task: Task, trial_id: str, *, step: int = 0, group: str = "") -> TrialResult:
        s = self.setup
        result = TrialResult(trial_id=trial_id, task=task.name, group=group, step=step)
        live = self._live[trial_id] = _Live()
        self._emit("trial_start", trial_id=trial_id, task=task.name, step=step, group=group)
        session = s.proxy.open_session(
            trial_id,
            s.dialect,
            sampling=s.sampling,
            max_calls=s.max_calls,
            small_model=small_model_name(s.model_name),
        )
        sandbox: Sandbox | None = None
        try:
            with self._phase(result, "sandbox_start"):
                sandbox = live.sandbox = s.sandbox.start(task, trial_id)
                provide_harness_files(sandbox, s.harness)
            self._attempt(task, sandbox, session, result)
        except _TrialEnded:
            pass
        except ResourceExhausted as exc:  # the agent's resource use stopped the sandbox: the policy's
            _end(result, Termination.RESOURCE_LIMIT, str(exc))
        except Exception as exc:  # a sandbox that fails to start, or our own bug
            phase = "sandbox" if sandbox is None else "engine"
            lost = sandbox is None or isinstance(exc, SandboxFailure)
            _end(
                result,
                Termination.SANDBOX_ERROR if lost else Termination.INTERNAL_ERROR,
                f"{'sandbox' if lost else phase}: {type(exc).__name__}: {exc}",
            )
            result.harness["traceback"] = traceback.format_exc(limit=8)
        finally:
            if sandbox is not None:
                with self._phase(result, "sandbox_stop"):
                    try:
                        sandbox.stop()
                    except Exception as exc:
                        result.harness["sandbox_stop_error"] = f"{type(exc).__name__}: {exc}"
            s.proxy.close_session(trial_id)
            result.trajectory = session.trajectory()
            result.subagents = [t for t in session.trajectories() if t.subagent]
            result.fidelity = session.metrics()
            result.calls = len(session.calls)
            result.call_versions = [
                (c.policy_version, len(c.completion_ids)) for c in session.calls if c.error is None
            ]
            self._live.pop(trial_id, None)
        if live.verdict is not None:
            _end(result, live.verdict.termination, live.verdict.reason)
            result.reward = 0.0
        if (defect := non_sampled(result)) is not None:
            _end(result, Termination.INTERNAL_ERROR, defect)
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
        with self._phase(result, "anticheat_before_agent"):
            self._check(result, phase_violations(s.anticheat, "before_agent", sandbox, task))
            if isinstance(sandbox, PristineVerify):
                sandbox.begin_agent()
        endpoint = Endpoint(
            base_url=sandbox.endpoint_url(session.base_url(s.proxy.url)),
            api_key=session.api_key,
            model=s.model_name,
            small_model=small_model_name(s.model_name),
        )
        with self._phase(result, "agent"):
            try:
                outcome = s.harness.run(sandbox, task, endpoint, timeout=task.agent_timeout)
            except (SandboxFailure, ResourceExhausted):
                raise  # the sandbox broke under the harness (sandbox_error), or the agent broke it
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
        with self._phase(result, "anticheat_before_verify"):
            self._check(result, phase_violations(s.anticheat, "before_verify", sandbox, task))
        with self._phase(result, "verify"):
            try:
                verdict = s.verifier.score(sandbox, task)
            except (SandboxFailure, ResourceExhausted):
                raise
            except Exception as exc:  # the verifier's own failure: what the tests say is a verdict
                verdict = VerifierResult(
                    0.0, {"reason": f"verifier: {type(exc).__name__}: {exc}"}, Termination.INTERNAL_ERROR
                )
        result.reward = verdict.reward
        result.verifier = verdict.details
        if verdict.termination is not None:
            _end(result, verdict.termination, str(verdict.details.get("reason", "")))
        _resource_limits(result, sandbox)
        with self._phase(result, "anticheat_after"):
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

    @contextmanager
    def _phase(self, result: TrialResult, name: str) -> Iterator[None]:
        live = self._live.get(result.trial_id)
        if live is not None:
            live.phase = name
        start = time.monotonic()
        try:
            yield
        finally:
            result.timings.append(PhaseTiming(phase=name, seconds=time.monotonic() - start))


def provide_harness_files(sandbox: Sandbox, harness: Harness) -> None:
    """Make the harness's own host files visible inside (a bind where the sandbox offers
    one, else a copy at the same path)."""
    files = harness.sandbox_files() if isinstance(harness, HarnessFiles) else []
    if not files:
        return
    if isinstance(sandbox, ProvidesFiles):
        sandbox.provide(files)
        return
    for path in files:
        sandbox.upload(path, str(path))


def small_model_name(model: str) -> str:
    """The name harnesses use for their small/fast model: the same policy, but calls made
    under it are recognisable as sub-agent calls."""
    return f"{model}-small"


class _TrialEnded(Exception):
    """Raised inside a trial to skip the remaining phases."""


def _termination(outcome: HarnessResult, session: ProxySession) -> Termination:
    """The harness's own verdict, corrected by what the proxy saw."""
    if session.context_overflow:
        return Termination.CONTEXT_OVERFLOW
    if session.limit_hit:
        return Termination.MAX_TURNS
    if outcome.termination != Termination.COMPLETED and any(c.error for c in session.calls):
        return Termination.API_ERROR  # the backend failed a call; the harness gave up on it
    return outcome.termination


_REPLACED_BY_LIMIT = {
    "agent": {Termination.COMPLETED, Termination.HARNESS_CRASH, Termination.AGENT_TIMEOUT},
    "verify": {Termination.VERIFIER_ERROR, Termination.VERIFIER_TIMEOUT},
}
"""Per phase, the endings a resource limit hit in that phase explains better."""


def _resource_limits(result: TrialResult, sandbox: Sandbox) -> None:
    """A sandbox that reports the resource limits its commands ran into (the local one's
    ``resources_exhausted()``: phase, limit, detail) turns the ending of the phase that hit
    one into ``resource_limit``, naming the limit and its value."""
    events = sandbox.resources_exhausted() if isinstance(sandbox, ReportsLimits) else []
    if not events:
        return
    result.harness["resources_exhausted"] = events
    for event in events:
        failed_tests = event["phase"] == "verify" and result.reward == 0.0  # the limit is why they failed
        if result.termination in _REPLACED_BY_LIMIT.get(event["phase"], ()) or (
            failed_tests and result.termination == Termination.COMPLETED
        ):
            reason = f"{event['limit']} ({event['phase']} phase: {event['detail']})"
            _end(result, Termination.RESOURCE_LIMIT, reason)
            return


def non_sampled(result: TrialResult) -> str | None:
    """Why ``result`` must not be trained, when a trajectory of it would train tokens the
    backend did not sample (``trained_non_sampled`` of its fidelity): a defect of our token
    bookkeeping, never the policy's (the trial ends ``internal_error``, infrastructure)."""
    names = ["main", *(f"sub-agent {i}" for i in range(1, len(result.fidelity)))]
    bad = [
        f"{name}: {int(f['trained_non_sampled'])} of {int(f['trained_tokens'])}"
        for name, f in zip(names, result.fidelity, strict=False)
        if f.get("trained_non_sampled", 0) > 0
    ]
    if not bad:
        return None
    return (
        "token bookkeeping: trained tokens that were not sampled (" + "; ".join(bad) + "); "
        "the trial is not trained"
    )


def _end(result: TrialResult, termination: Termination, reason: str) -> None:
    result.termination = termination
    result.reason = reason


def _stop_quietly(sandbox: Sandbox) -> None:
    try:
        sandbox.stop()
    except Exception:  # noqa: BLE001 - the trial's own stop reports the error
        pass
