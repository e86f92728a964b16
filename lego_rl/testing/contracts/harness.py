"""Harness contracts: it speaks an installed dialect, and driven by the ``scripted`` policy
through the proxy it solves the kit's fix-add task, and fails it when the policy does nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lego_rl.data import Termination, TrialResult
from lego_rl.kinds import ScriptsConformance
from lego_rl.testing.contracts.base import (
    ContractEnv,
    contract,
    expect,
    no_fatal_problems,
    problems,
    satisfies_protocol,
)

CONFORMANCE_COMMANDS = [
    "sed -i 's/a - b/a + b/' calc.py",
    "python3 -c 'from calc import add; assert add(2, 3) == 5' && echo tests pass",
]
"""Shell commands that solve the kit's fix-add task (edit the file, run the tests) from its
working directory. A harness turns them into its own tool calls (``conformance_script``)."""
HARNESS_CONTEXT = 32768
"""Context of the conformance policy: a harness's first request can be long (tools, system)."""


@contract("harness", "structure")
def structure(harness: Any, env: ContractEnv) -> None:
    """it has the Harness shape and speaks an installed dialect"""
    satisfies_protocol(harness, "harness")
    problems(harness)
    expect(isinstance(harness.dialect, str) and bool(harness.dialect), "harness needs a dialect")
    expect(
        harness.dialect in env.registry.names("dialect"),
        f"harness speaks {harness.dialect!r}, which no installed dialect plugin serves",
    )


@contract("harness", "preflight")
def preflight(harness: Any, env: ContractEnv) -> None:
    """preflight finds everything the harness needs (its CLI, its version)"""
    no_fatal_problems(harness)


@contract("harness", "solves-task")
def solves_task(harness: Any, env: ContractEnv) -> None:
    """the scripted policy that runs the fixing commands earns reward 1"""
    _scripted_outcome(harness, env, CONFORMANCE_COMMANDS, 1.0)


@contract("harness", "do-nothing-fails")
def do_nothing_fails(harness: Any, env: ContractEnv) -> None:
    """the scripted policy that changes nothing gets reward 0, the trial still completed"""
    _scripted_outcome(harness, env, [], 0.0)


def _scripted_outcome(harness: Any, env: ContractEnv, commands: list[str], expected: float) -> None:
    no_fatal_problems(harness)
    expect(
        isinstance(harness, ScriptsConformance),
        "harness needs conformance_script(commands) -> policy turns (lego_rl.kinds.ScriptsConformance): how the scripted policy "
        "runs shell commands through this harness's own tool (see harness_kit.command_turns)",
    )
    turns = harness.conformance_script(list(commands))
    expect(
        isinstance(turns, list) and all(isinstance(t, dict) for t in turns),
        f"conformance_script must return a list of turn dicts, got {turns!r}",
    )
    result, sampled = scripted_trial(harness, turns, env, f"contract-harness-{int(expected)}")
    what = f"{'solving' if commands else 'do-nothing'} script"
    expect(
        result.termination == Termination.COMPLETED,
        f"{what}: trial ended {result.termination}: {result.reason}",
    )
    expect(result.reward == expected, f"{what}: reward {result.reward} != {expected}")
    expect(result.calls == len(turns), f"{what}: {result.calls} calls for {len(turns)} turns")
    trained = result.trajectory.trained_tokens if result.trajectory else 0
    expect(trained == sampled > 0, f"{what}: {trained} trained tokens, but the policy sampled {sampled}")


def scripted_trial(
    harness: Any, turns: list[dict[str, Any]], env: ContractEnv, trial_id: str
) -> tuple[TrialResult, int]:
    """One trial of ``harness`` on fix-add, the ``scripted`` policy answering with ``turns``
    through the proxy; returns the result and the number of completion tokens sampled."""
    from lego_rl.engine.scripted import scripted_trial as run_scripted

    for kind, name in (("inference", "scripted"), ("verifier", "test-script")):
        expect(name in env.registry.names(kind), f"the harness contracts need the {kind} plugin {name!r}")
    env = replace(env, model=env.model.model_copy(update={"max_context": HARNESS_CONTEXT}))
    ctx = env.build_context()
    result, calls = run_scripted(
        harness=harness,
        sandbox=env.sandbox_backend(),
        verifier=env.registry.build("verifier", "test-script", None, ctx),
        inference=env.registry.build("inference", "scripted", {"turns": turns, "device": "cpu"}, ctx),
        dialect=env.registry.build("dialect", harness.dialect, None, ctx),
        model=env.model,
        task=env.task("fix-add"),
        trial_id=trial_id,
        turns=len(turns),
    )
    return result, sum(len(c.completion_ids) for c in calls if c.error is None)
