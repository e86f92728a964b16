"""Anti-cheat contracts: an honest trial passes, and the cheat the policy demonstrates is
caught in the phase it names, through the engine's own phase path
(:func:`lego_rl.anticheat_checks.phase_violations`). A policy that catches nothing fails."""

from __future__ import annotations

import secrets
import shutil
from typing import Any

from lego_rl.anticheat_checks import CheckError, phase_violations
from lego_rl.kinds import (
    CheatDemo,
    ChecksBeforeAgent,
    ChecksBeforeVerify,
    DemonstratesCheat,
    PristineVerify,
    Sandbox,
    Task,
    Violation,
)
from lego_rl.testing.contracts.base import ContractEnv, contract, expect, result
from lego_rl.testing.contracts.sandbox import started


@contract("anticheat", "honest-trial-passes")
def honest_passes(policy: Any, env: ContractEnv) -> None:
    """an untouched, honest trial is not flagged before the agent, before the verifier or after"""
    expect(isinstance(policy.name, str) and bool(policy.name), "anticheat needs a name")
    with started(env.sandbox_backend(), env, f"contract-anticheat-{secrets.token_hex(4)}") as sandbox:
        task = env.task()
        seal(sandbox)
        expect(phase_violations([policy], "before_agent", sandbox, task) == [], "honest trial flagged before agent")
        expect(phase_violations([policy], "before_verify", sandbox, task) == [], "honest trial flagged before verify")
        honest = result(1.0)
        expect(policy.after(sandbox, task, honest) == [], "honest trial flagged after verification")


@contract("anticheat", "catches-its-cheat")
def catches_cheat(policy: Any, env: ContractEnv) -> None:
    """the cheat the policy demonstrates (DemonstratesCheat) is caught in the phase it names"""
    expect(
        isinstance(policy, DemonstratesCheat),
        "an anti-cheat policy must show a cheat it catches: cheat_demonstration(scratch) -> "
        "lego_rl.kinds.CheatDemo (lego_rl.kinds.DemonstratesCheat)",
    )
    scratch = env.tmp / "cheat-demo"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    demo = policy.cheat_demonstration(scratch)
    expect(isinstance(demo, CheatDemo), f"cheat_demonstration returned {type(demo).__name__}, not CheatDemo")
    task = env.task()
    with started(env.sandbox_backend(), env, f"contract-cheat-{secrets.token_hex(4)}") as sandbox:
        seal(sandbox)
        if demo.seen is not None:
            expect(judged(policy, demo, sandbox, task), f"its {demo.phase} check's judge passed what it reads when broken")
            return
        if demo.phase != "before_agent":
            phase_violations([policy], "before_agent", sandbox, task)
        stage(sandbox, demo)
        caught = caught_in_phase(policy, demo, sandbox, task)
        if not caught and demo.works:
            caught = not cheat_works(sandbox, demo)
    expect(caught, f"{policy.name}'s own cheat went uncaught in {demo.phase} (stage: {demo.stage.strip()[:200]!r})")


def seal(sandbox: Sandbox) -> None:
    """Seal the starting state as the engine does before the agent runs."""
    if isinstance(sandbox, PristineVerify):
        sandbox.begin_agent()


def stage(sandbox: Sandbox, demo: CheatDemo) -> None:
    """Commit the cheat; it must be in place afterwards, or the demonstration proves nothing."""
    if demo.stage:
        out = sandbox.exec(demo.stage, timeout=60)
        expect(out.exit_code == 0, f"staging the cheat failed (exit {out.exit_code}): {out.stderr.strip()[-300:]}")
    if demo.works:
        expect(cheat_works(sandbox, demo), f"the staged cheat is not in place: {demo.works!r} fails before the phase")


def cheat_works(sandbox: Sandbox, demo: CheatDemo) -> bool:
    return sandbox.exec(demo.works, timeout=60).exit_code == 0


def caught_in_phase(policy: Any, demo: CheatDemo, sandbox: Sandbox, task: Task) -> bool:
    """The phase flagged the cheat, refused to go on, or (after) recorded it on the result."""
    if demo.phase == "after":
        shown = result(1.0)
        shown.verifier.update(demo.verifier)
        before = dict(shown.verifier)
        return bool(policy.after(sandbox, task, shown)) or shown.verifier != before
    try:
        return bool(phase_violations([policy], demo.phase, sandbox, task))
    except CheckError:
        return True


def judged(policy: Any, demo: CheatDemo, sandbox: Sandbox, task: Task) -> bool:
    """What the phase's shell check reads when broken (``demo.seen``), given to its judge."""
    offers = ChecksBeforeAgent if demo.phase == "before_agent" else ChecksBeforeVerify
    expect(isinstance(policy, offers), f"a demo with `seen` needs the policy's {demo.phase} shell check ({offers.__name__})")
    getter = policy.before_agent_check if demo.phase == "before_agent" else policy.before_verify_check
    check = getter(sandbox, task)
    expect(check is not None, f"{policy.name} offers no {demo.phase} check to judge what it reads")
    try:
        found: list[Violation] = check.judge(demo.seen or "")
    except CheckError:
        return True
    return bool(found)
