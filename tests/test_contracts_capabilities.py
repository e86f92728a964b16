"""The capability contracts hold a plugin to what it declares: doubles that each declare a
capability and break it fail the contract, naming the breach; the real plugins pass."""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from legorl_std.dialects.anthropic import AnthropicDialect
from legorl_std.dialects.openai_chat import OpenAIChatDialect

from lego_rl.data import Generation, Sampling
from lego_rl.kinds import ChatRequest, Check, Sandbox, Task, Violation
from lego_rl.registry import default_registry
from lego_rl.testing.contracts import ContractEnv, ContractError, base, contract_named
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer
from lego_rl.wrapping import expose


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


class Renamed:
    """OpenAI chat whose parse_body reads the model under another name than parse does."""

    def __init__(self) -> None:
        self.inner = OpenAIChatDialect()
        expose(self, self.inner)

    def parse_body(self, body: bytes, scope: str = "") -> ChatRequest | None:
        request = self.inner.parse_body(body, scope)
        if request is not None:
            request.model = "renamed"
        return request


def test_parse_body_must_read_as_parse_does(env):
    contract_named("dialect.parse-body").check(OpenAIChatDialect(), env)
    assert "parse_body read model 'renamed'" in breach("dialect.parse-body", Renamed(), env)


class CountsOnItsCallRoute:
    def __init__(self) -> None:
        expose(self, AnthropicDialect())
        self.count_tokens_route = ("POST", "/v1/messages")


def test_count_tokens_is_its_own_route_and_counts_the_calls_prompt(env):
    contract_named("dialect.count-tokens").check(AnthropicDialect(), env)
    assert "is one of the dialect's call routes" in breach("dialect.count-tokens", CountsOnItsCallRoute(), env)


class Marked:
    owns_rollout = False

    def preflight(self) -> list[Any]:
        return []

    def run(self, ctx: Any) -> None: ...


def test_owns_rollout_is_a_claim_not_a_setting(env):
    assert "owns_rollout is False" in breach("trainer.owns-rollout", Marked(), env)


class Needs:
    def __init__(self, needs: Any) -> None:
        self.inference_needs = needs

    def preflight(self) -> list[Any]:
        return []


def test_inference_needs_are_runtime_checkable_protocols(env):
    from lego_rl.kinds import LoadsWeights, ScoresTokens

    assert "not a runtime-checkable Protocol" in breach("trainer.inference-needs", Needs((LoadsWeights, dict)), env)
    assert "not a tuple" in breach("trainer.inference-needs", Needs([LoadsWeights]), env)
    contract_named("trainer.inference-needs").check(Needs((LoadsWeights, ScoresTokens)), env)


class Budget:
    def __init__(self, budget: Any) -> None:
        self.resample_budget = budget


@pytest.mark.parametrize("budget", [-0.5, float("nan"), "half"])
def test_resample_budget_is_a_finite_share(env, budget):
    assert "resample_budget must be a finite number >= 0" in breach("filter.resample-budget", Budget(budget), env)
    contract_named("filter.resample-budget").check(Budget(0.5), env)


class Reference:
    needs_reference = "sometimes"


def test_needs_reference_is_a_bool(env):
    assert "needs_reference is 'sometimes'" in breach("optimizer.reference", Reference(), env)


class Dice:
    """Samples random ids; ``restores`` says whether set_rng_state really restores."""

    policy_version = 0

    def __init__(self, restores: bool) -> None:
        self.tokenizer = tiny_chat_tokenizer()
        self.rng, self.restores = random.Random(0), restores

    def preflight(self) -> list[Any]:
        return []

    def generate(
        self, prompt_ids: Sequence[int], sampling: Sampling, on_token: Callable[[int, float], None] | None = None
    ) -> Generation:
        ids = [self.rng.randrange(40, 120) for _ in range(sampling.max_tokens)]
        return Generation(completion_ids=ids, logprobs=[-1.0] * len(ids))

    def get_rng_state(self) -> Any:
        return self.rng.getstate()

    def set_rng_state(self, state: Any) -> None:
        if self.restores:
            self.rng.setstate(state)


def test_rng_state_must_repeat_the_sample(env):
    contract_named("inference.rng-state").check(Dice(restores=True), env)
    assert "after set_rng_state the sample was" in breach("inference.rng-state", Dice(restores=False), env)


class Suspicious:
    """Flags every trial before the agent, through a shell check."""

    name = "suspicious"

    def __init__(self, policy: str = "suspicious") -> None:
        self.policy = policy

    def before_agent_check(self, sandbox: Sandbox, task: Task) -> Check | None:
        return Check(self.policy, "echo always", lambda out: [Violation(self.policy, out.strip())])

    def before_agent(self, sandbox: Sandbox, task: Task) -> list[Violation]:
        return []

    def before_verify(self, sandbox: Sandbox, task: Task) -> list[Violation]:
        return []

    def after(self, sandbox: Sandbox, task: Task, result: Any) -> list[Violation]:
        return []


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the kit's sandbox (local) needs bubblewrap")
@pytest.mark.parametrize(
    "policy, finding",
    [("suspicious", "honest trial flagged by before_agent_check"), ("other", "names policy 'other'")],
)
def test_shell_checks_must_be_the_policys_own_and_pass_an_honest_trial(env, policy, finding):
    assert finding in breach("anticheat.shell-checks", Suspicious(policy), env)
