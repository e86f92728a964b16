"""Contracts that a plugin doing nothing, or claiming more than it does, fails: anti-cheat
(against the real local sandbox), observer, inference log-probs (against the tiny embedded
model) and a filter's resample claim: test doubles that each break one promise."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from lego_rl.data import TrialResult
from lego_rl.kinds import CheatDemo, Check, Event, Sandbox, Task, Violation
from lego_rl.registry import default_registry
from lego_rl.testing.contracts import ContractEnv, ContractError, base, contract_named

local_sandbox = pytest.mark.skipif(
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


@local_sandbox
def test_an_idle_policy_passes_an_honest_trial_but_shows_no_cheat(env):
    contract_named("anticheat.honest-trial-passes").check(Idle(), env)
    assert "DemonstratesCheat" in breach("anticheat.catches-its-cheat", Idle(), env)


@local_sandbox
def test_a_policy_must_catch_the_cheat_it_shows(env):
    assert "went uncaught in before_verify" in breach("anticheat.catches-its-cheat", Claims(REWARD_FILE), env)


@local_sandbox
@pytest.mark.parametrize("phase", ["before_agent", "after"])
def test_the_phase_a_policy_names_is_the_one_that_must_catch_it(env, phase):
    demo = CheatDemo(phase, stage=REWARD_FILE.stage, works=REWARD_FILE.works)  # type: ignore[arg-type]
    assert f"went uncaught in {phase}" in breach("anticheat.catches-its-cheat", Claims(demo), env)


@local_sandbox
def test_a_cheat_that_is_not_in_place_proves_nothing(env):
    demo = CheatDemo("before_verify", stage="true", works="test -e /nothing-was-staged")
    assert "not in place" in breach("anticheat.catches-its-cheat", Claims(demo), env)


@local_sandbox
def test_what_a_broken_sandbox_shows_must_be_judged_a_breach(env):
    demo = CheatDemo("before_agent", seen="  eth0: 1 2 3\n")
    assert "passed what it reads" in breach("anticheat.catches-its-cheat", Judges(demo, flags=False), env)
    contract_named("anticheat.catches-its-cheat").check(Judges(demo, flags=True), env)


# ------------------------------------------------------------------ observer


class Deaf:
    """An observer that takes every event and keeps none."""

    def emit(self, event: Event) -> None:
        pass

    def close(self) -> None:
        pass


class Unserved(Deaf):
    """Claims to serve; never starts."""

    url: str | None = None


class Elsewhere(Deaf):
    """Writes a line per event, but not the step's metrics."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def emit(self, event: Event) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as out:
            out.write(event.kind + "\n")


def test_an_observer_that_keeps_nothing_takes_every_event_but_leaves_no_trace(env):
    contract_named("observer.takes-every-event").check(Deaf(), env)
    assert "left no trace of the step" in breach("observer.leaves-a-trace", Deaf(), env)


def test_an_observer_must_keep_the_steps_metrics_not_only_that_a_step_happened(env):
    run_dir = env.build_context().run_dir
    assert "left no trace of the step" in breach("observer.leaves-a-trace", Elsewhere(run_dir / "kinds.log"), env)


def test_an_observer_that_claims_to_serve_must_serve(env):
    assert "url is None" in breach("observer.leaves-a-trace", Unserved(), env)


# ------------------------------------------------------------------ inference


@pytest.fixture(scope="module")
def tiny() -> Any:
    from legorl_embedded.inference.hf import HFInference
    from legorl_embedded.options import HFInferenceOptions

    from lego_rl.spec.models import ModelSpec

    return HFInference(ModelSpec(name="tiny", max_context=256), HFInferenceOptions(device="cpu", threads=1), seed=0)


class MadeUp:
    """Samples with the real model, reports log-probs it made up; scores honestly."""

    def __init__(self, real: Any, scores: bool = True) -> None:
        self.real = real
        if scores:
            self.score = real.score

    tokenizer = property(lambda self: self.real.tokenizer)
    policy_version = property(lambda self: self.real.policy_version)

    def preflight(self) -> list[Any]:
        return []

    def generate(self, prompt_ids: Any, sampling: Any, on_token: Any = None) -> Any:
        gen = self.real.generate(prompt_ids, sampling)
        gen.logprobs = [-0.1] * len(gen.completion_ids)
        for token, logprob in zip(gen.completion_ids, gen.logprobs, strict=True):
            if on_token is not None:
                on_token(token, logprob)
        return gen


def test_made_up_log_probs_pass_the_shape_contract_but_not_the_models(env, tiny):
    contract_named("inference.samples").check(MadeUp(tiny), env)
    assert "differ from the model's scoring" in breach("inference.logprobs-are-the-models", MadeUp(tiny), env)
    contract_named("inference.logprobs-are-the-models").check(tiny, env)


def test_an_inference_that_cannot_score_cannot_be_checked(env, tiny):
    assert "ScoresTokens" in breach("inference.logprobs-are-the-models", MadeUp(tiny, scores=False), env)


# ------------------------------------------------------------------ filter


class Lenient:
    """Claims a resample budget; keeps every group."""

    resample_budget = 1.0

    def select_tasks(self, tasks: list[Task]) -> list[Task]:
        return list(tasks)

    def keep_group(self, group: list[TrialResult]) -> bool:
        return True


def test_a_filter_that_claims_to_resample_must_reject_something(env):
    assert "rejects nothing" in breach("filter.rejects-what-it-resamples", Lenient(), env)
    lenient = Lenient()
    lenient.resample_budget = 0.0  # no claim: a filter may keep everything (filter `none`)
    contract_named("filter.rejects-what-it-resamples").check(lenient, env)

