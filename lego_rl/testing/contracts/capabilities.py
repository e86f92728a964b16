"""Contracts of the capabilities of the small kinds and the model side: each runs only on a
plugin that offers the capability (:mod:`lego_rl.kinds`) and holds it to what it declares."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from lego_rl.anticheat_checks import run_checks
from lego_rl.data import Sampling
from lego_rl.kinds import (
    Check,
    ChecksBeforeAgent,
    ChecksBeforeVerify,
    NeedsInference,
    OwnsRollout,
    ResamplesGroups,
    RestoresRngState,
    Sandbox,
    Task,
    UsesReference,
)
from lego_rl.testing.contracts import components, model  # noqa: F401  (their contracts run first)
from lego_rl.testing.contracts.base import ContractEnv, contract, expect, no_fatal_problems, result
from lego_rl.testing.contracts.sandbox import started


@contract("trainer", "owns-rollout")
def owns_rollout(trainer: Any, env: ContractEnv) -> None:
    """where declared, owns_rollout is True (declaring it is the claim)"""
    no_fatal_problems(trainer)  # an unfinished trainer fails every behavioural contract
    if isinstance(trainer, OwnsRollout):
        expect(
            trainer.owns_rollout is True,
            f"owns_rollout is {trainer.owns_rollout!r}; a trainer that does not run its own rollouts leaves it out",
        )


@contract("trainer", "inference-needs")
def inference_needs(trainer: Any, env: ContractEnv) -> None:
    """where declared, inference_needs is a tuple of runtime-checkable Protocols (what plan checks
    the inference against)"""
    no_fatal_problems(trainer)  # an unfinished trainer fails every behavioural contract
    if isinstance(trainer, NeedsInference):
        needs = trainer.inference_needs
        expect(isinstance(needs, tuple), f"inference_needs is {needs!r}, not a tuple")
        for need in needs:
            checkable = getattr(need, "_is_protocol", False) and getattr(need, "_is_runtime_protocol", False)
            expect(checkable, f"inference_needs holds {need!r}, not a runtime-checkable Protocol")


@contract("optimizer", "reference")
def reference(optimizer: Any, env: ContractEnv) -> None:
    """where offered, needs_reference is a bool"""
    if isinstance(optimizer, UsesReference):
        expect(isinstance(optimizer.needs_reference, bool), f"needs_reference is {optimizer.needs_reference!r}")


@contract("filter", "resample-budget")
def resample_budget(component: Any, env: ContractEnv) -> None:
    """where offered, resample_budget is a finite share >= 0"""
    if isinstance(component, ResamplesGroups):
        budget = component.resample_budget
        expect(
            isinstance(budget, int | float) and math.isfinite(budget) and budget >= 0,
            f"resample_budget must be a finite number >= 0, got {budget!r}",
        )


@contract("filter", "rejects-what-it-resamples")
def rejects_what_it_resamples(component: Any, env: ContractEnv) -> None:
    """a filter with a resample budget > 0 (ResamplesGroups) rejects some group: the budget is that claim"""
    keep_group = component.keep_group  # the Filter's, read before isinstance narrows the name
    if not isinstance(component, ResamplesGroups) or not component.resample_budget:
        return
    groups = {
        "all passed": [result(1.0, "a"), result(1.0, "b")],
        "all failed": [result(0.0, "a"), result(0.0, "b")],
        "mixed": [result(1.0, "a"), result(0.0, "b")],
    }
    kept = {name: keep_group(group) for name, group in groups.items()}
    expect(
        not all(kept.values()),
        f"resample_budget is {component.resample_budget}, but keep_group kept every group ({', '.join(kept)}): "
        "a filter that rejects nothing has nothing to resample",
    )


@contract("anticheat", "shell-checks")
def shell_checks(policy: Any, env: ContractEnv) -> None:
    """where offered, a phase's shell check is the policy's own and passes an honest trial"""
    offered: list[tuple[str, Callable[[Sandbox, Task], Check | None]]] = []
    if isinstance(policy, ChecksBeforeAgent):
        offered.append(("before_agent", policy.before_agent_check))
    if isinstance(policy, ChecksBeforeVerify):
        offered.append(("before_verify", policy.before_verify_check))
    if not offered:
        return
    with started(env.sandbox_backend(), env, "contract-anticheat-checks") as sandbox:
        task = env.task()
        for phase, make in offered:
            check = make(sandbox, task)
            if check is None:
                continue
            expect(isinstance(check, Check), f"{phase}_check returned {check!r}, not a lego_rl.kinds.Check")
            expect(check.policy == policy.name, f"{phase}_check's Check names policy {check.policy!r}, not {policy.name!r}")
            found = run_checks(sandbox, [check])
            expect(found == [], f"honest trial flagged by {phase}_check: {found}")


@contract("inference", "rng-state")
def rng_state(component: Any, env: ContractEnv) -> None:
    """where offered, set_rng_state(get_rng_state()) makes the next sample repeat"""
    no_fatal_problems(component)  # an unfinished backend fails every behavioural contract
    inference: Any = component  # the Inference beside the capability (isinstance narrows the name)
    if not isinstance(component, RestoresRngState):
        return
    tok = inference.tokenizer
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    ids = list(tok.encode(text, add_special_tokens=False))
    sampling = Sampling(max_tokens=8, temperature=1.0)
    state = component.get_rng_state()
    first = list(inference.generate(ids, sampling).completion_ids)
    component.set_rng_state(state)
    again = list(inference.generate(ids, sampling).completion_ids)
    expect(first == again, f"after set_rng_state the sample was {again}, the first one {first}")
