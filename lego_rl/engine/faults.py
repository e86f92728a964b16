"""Fault handling of the rollout pool: what a stuck trial ends as, and what gets retried.

A trial past its wall-clock limit is ended by the pool's watchdog; the phase it was stuck
in decides the reason: an agent that runs too long is the policy's doing, a sandbox that
hangs (or does not end the verifier at its timeout) is ours. Infrastructure failures are
retried up to ``run.retries`` times and never enter the gradient (the trainer drops them
from groups).
"""

from __future__ import annotations

from lego_rl.data import Attribution, Termination, TrialResult, attribute

PHASE_TERMINATION: dict[str, Termination] = {
    "sandbox_start": Termination.SANDBOX_ERROR,
    "anticheat_before_agent": Termination.SANDBOX_ERROR,
    "agent": Termination.AGENT_TIMEOUT,
    "anticheat_before_verify": Termination.SANDBOX_ERROR,
    "verify": Termination.SANDBOX_ERROR,
    "anticheat_after": Termination.SANDBOX_ERROR,
    "sandbox_stop": Termination.SANDBOX_ERROR,
}
"""The phase a trial was stuck in -> why it ended."""

TRIAL_TIMEOUT_MARGIN_S = 120.0
"""Default trial limit beyond the task's agent + verifier timeouts (sandbox start/stop)."""


def watchdog_verdict(phase: str, limit: float) -> tuple[Termination, str]:
    """Termination and reason of a trial ended by the watchdog in ``phase``."""
    termination = PHASE_TERMINATION.get(phase, Termination.INTERNAL_ERROR)
    return termination, f"watchdog: trial exceeded its limit of {limit:.0f}s in phase {phase or '?'}"


def timed_out(
    trial_id: str, task: str, group: str, step: int, phase: str, limit: float, why: str = ""
) -> TrialResult:
    """The result the pool records for a trial it gave up on: past its limit in ``phase``,
    or cancelled for ``why`` (nobody's fault: see Termination.CANCELLED)."""
    termination, reason = watchdog_verdict(phase, limit)
    if why:
        termination, reason = Termination.CANCELLED, why
    return TrialResult(
        trial_id=trial_id,
        task=task,
        group=group,
        step=step,
        termination=termination,
        attribution=attribute(termination),
        reason=reason,
    )


def should_retry(result: TrialResult, attempt: int, retries: int) -> bool:
    """Infrastructure failures are run again, at most ``retries`` times per trial."""
    return result.attribution == Attribution.INFRASTRUCTURE and attempt < retries
