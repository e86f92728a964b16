"""One trial driven by a scripted policy: a harness, its sandbox and verifier, a proxy of its
own in front of a ``scripted`` inference backend. The conformance contracts use it to prove a
harness; ``legorl warmstart`` uses it to record demonstrations through the real harness."""

from __future__ import annotations

from typing import Any

from lego_rl.data import CallRecord, Sampling, TrialResult
from lego_rl.engine.wiring import TrialLimits, TrialWiring
from lego_rl.kinds import AntiCheat, Harness, SandboxBackend, Task, Verifier
from lego_rl.spec.models import ModelSpec


def scripted_trial(
    *,
    harness: Harness,
    sandbox: SandboxBackend,
    verifier: Verifier,
    inference: Any,
    dialect: Any,
    model: ModelSpec,
    task: Task,
    trial_id: str,
    turns: int,
    max_tokens: int = 512,
    anticheat: list[AntiCheat] | None = None,
) -> tuple[TrialResult, list[CallRecord]]:
    """Run ``task`` once; ``inference`` answers with its script (``turns`` replies). Returns the
    result and the proxy's record of every model call, in call order."""
    calls: list[CallRecord] = []
    wiring = TrialWiring(inference, harness.dialect, dialect, model, on_call=calls.append)
    runner = wiring.runner(
        sandbox=sandbox,
        harness=harness,
        verifier=verifier,
        limits=TrialLimits(Sampling(temperature=1.0, max_tokens=max_tokens), turns + 2),
        anticheat=anticheat or [],
    )
    with wiring.serving():
        result = runner.run(task, trial_id)
    return result, calls
