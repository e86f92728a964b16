"""The contracts of kinds whose purpose the kit cannot guess (anti-cheat, observer) fail a
plugin that does nothing, and one that claims more than it does: test doubles that each
break one promise, against the real local sandbox."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from lego_rl.data import TrialResult
from lego_rl.kinds import CheatDemo, Check, Sandbox, Task, Violation
from lego_rl.registry import default_registry
from lego_rl.testing.contracts import ContractEnv, ContractError, base, contract_named

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0,
    reason="the local sandbox needs bubblewrap, as root (overlay, per-trial users)",
)

REWARD_FILE = CheatDemo(
    "before_verify", stage="mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt",
    works="test -s /logs/verifier/reward.txt",
)  # fmt: skip


@pytest.fixture
def env(tmp_path, monkeypatch):
    tasks = tmp_path / "kit-tasks"
    shutil.copytree(base.conformance_tasks_dir(), tasks)
    monkeypatch.setattr(base, "conformance_tasks_dir", lambda: tasks)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return ContractEnv(scratch, default_registry())


def breach(contract_id: str, component: Any, env: ContractEnv) -> str:
    with pytest.raises(ContractError) as info:
        contract_named(contract_id).check(component, env)
    return str(info.value)


# ------------------------------------------------------------------ anti-cheat


class Idle:
    """An anti-cheat policy that flags nothing, ever."""

    name = "idle"

    def before_agent(self, sandbox: Sandbox, task: Task) -> list[Violation]:
        return []

    def before_verify(self, sandbox: Sandbox, task: Task) -> list[Violation]:
        return []

    def after(self, sandbox: Sandbox, task: Task, result: TrialResult) -> list[Violation]:
        return []


class Claims(Idle):
    """Shows a cheat, catches nothing."""

    def __init__(self, demo: CheatDemo) -> None:
        self.demo = demo

    def cheat_demonstration(self, scratch: Path) -> CheatDemo:
        return self.demo


class Judges(Claims):
    """A before-agent shell check whose judge decides."""

    def __init__(self, demo: CheatDemo, flags: bool) -> None:
        super().__init__(demo)
        self.flags = flags

    def before_agent_check(self, sandbox: Sandbox, task: Task) -> Check:
        return Check(self.name, "cat /proc/net/dev", lambda text: [Violation(self.name, "eth0")] if self.flags and "eth0" in text else [])


def test_an_idle_policy_passes_an_honest_trial_but_shows_no_cheat(env):
    contract_named("anticheat.honest-trial-passes").check(Idle(), env)
    assert "DemonstratesCheat" in breach("anticheat.catches-its-cheat", Idle(), env)


def test_a_policy_must_catch_the_cheat_it_shows(env):
    assert "went uncaught in before_verify" in breach("anticheat.catches-its-cheat", Claims(REWARD_FILE), env)


@pytest.mark.parametrize("phase", ["before_agent", "after"])
def test_the_phase_a_policy_names_is_the_one_that_must_catch_it(env, phase):
    demo = CheatDemo(phase, stage=REWARD_FILE.stage, works=REWARD_FILE.works)  # type: ignore[arg-type]
    assert f"went uncaught in {phase}" in breach("anticheat.catches-its-cheat", Claims(demo), env)


def test_a_cheat_that_is_not_in_place_proves_nothing(env):
    demo = CheatDemo("before_verify", stage="true", works="test -e /nothing-was-staged")
    assert "not in place" in breach("anticheat.catches-its-cheat", Claims(demo), env)


def test_what_a_broken_sandbox_shows_must_be_judged_a_breach(env):
    demo = CheatDemo("before_agent", seen="  eth0: 1 2 3\n")
    assert "passed what it reads" in breach("anticheat.catches-its-cheat", Judges(demo, flags=False), env)
    contract_named("anticheat.catches-its-cheat").check(Judges(demo, flags=True), env)
