"""One trial driven by a scripted policy: a harness, its sandbox and verifier, a proxy of its
own in front of a ``scripted`` inference backend. The conformance contracts use it to prove a
harness; ``legorl warmstart`` uses it to record demonstrations through the real harness."""

from __future__ import annotations

from typing import Any

from lego_rl.data import CallRecord, Sampling, TrialResult
from lego_rl.engine.trial import TrialRunner, TrialSetup
from lego_rl.kinds import AntiCheat, Harness, SandboxBackend, Task, Verifier
from lego_rl.proxy.server import ProxyServer
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
    proxy = ProxyServer(
        inference,
        {harness.dialect: dialect},
        model_name=model.name,
        max_context=model.max_context,
        chat_template=model.chat_template,
        on_call=calls.append,
    )
    setup = TrialSetup(
        sandbox=sandbox,
        harness=harness,
        verifier=verifier,
        proxy=proxy,
        dialect=harness.dialect,
        model_name=model.name,
        sampling=Sampling(temperature=1.0, max_tokens=max_tokens),
        max_calls=turns + 2,
        anticheat=list(anticheat or []),
    )
    proxy.start()
    try:
        result = TrialRunner(setup).run(task, trial_id)
    finally:
        proxy.stop()
    return result, calls
