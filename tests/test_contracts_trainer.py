"""The trainer contracts fail trainers that break one promise each, and pass the embedded
trainer: one that does nothing, one that reports steps with the weights left as they were,
one that climbs its loss, and resumes that drop the optimizer's moments, restart a random
generator or run again from the start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from lego_rl.kinds import RunContext
from lego_rl.registry import default_registry
from lego_rl.testing.contracts import ContractEnv, ContractError, contract_named


@pytest.fixture
def env(tmp_path):
    return ContractEnv(tmp_path, default_registry())


def breach(contract_id: str, trainer: Any, env: ContractEnv) -> str:
    with pytest.raises(ContractError) as info:
        contract_named(contract_id).check(trainer, env)
    return str(info.value)


def embedded(env: ContractEnv, kind: type | None = None) -> Any:
    """The embedded trainer built as the conformance test builds it (or as ``kind``, a subclass)."""
    from legorl_embedded.training.trainer import EmbeddedTrainer

    info = env.registry.get("trainer", "embedded")
    return (kind or EmbeddedTrainer)(info.options.model_validate({}), env.build_context())


class Steps:
    """Rolls out and reports each step; ``push``: hands inference back the weights it has."""

    def __init__(self, push: bool) -> None:
        self.push = push

    def preflight(self) -> list[Any]:
        return []

    def run(self, ctx: RunContext) -> None:
        for step in range(ctx.spec.run.steps):
            ctx.rollout(step)
            if self.push:
                ctx.inference.load_weights(ctx.inference.state_dict(), step + 1)  # type: ignore[attr-defined]
            ctx.event("step", step=step, loss=0.0)


class Idle(Steps):
    def run(self, ctx: RunContext) -> None:
        pass


class Noisy(Steps):
    """Moves the weights by seeded noise each step and keeps them in ``checkpoints/last``.

    ``keeps_rng``: the checkpoint holds the noise generator's state (else a resume seeds it
    afresh, as a trainer that seeds at start does); ``resumes``: it reads the checkpoint at all.
    """

    def __init__(self, keeps_rng: bool = True, resumes: bool = True) -> None:
        super().__init__(push=True)
        self.keeps_rng, self.resumes = keeps_rng, resumes

    def run(self, ctx: RunContext) -> None:
        rng = torch.Generator().manual_seed(ctx.spec.run.seed)
        weights = dict(ctx.inference.state_dict())  # type: ignore[attr-defined]
        first, where = 0, ctx.extra.get("resume_from")
        if where and self.resumes:
            state = torch.load(Path(where) / "state.pt", weights_only=True)
            weights, first = state["weights"], state["step"]
            if self.keeps_rng:
                rng.set_state(state["rng"])
        for step in range(first, ctx.spec.run.steps):
            ctx.rollout(step)
            weights = {k: v + 1e-3 * torch.randn(v.shape, generator=rng) if v.is_floating_point() else v
                       for k, v in weights.items()}  # fmt: skip
            ctx.inference.load_weights(weights, step + 1)  # type: ignore[attr-defined]
            ctx.event("step", step=step, loss=0.0)
            last = ctx.run_dir / "checkpoints" / "last"
            last.mkdir(parents=True, exist_ok=True)
            torch.save({"weights": weights, "step": step + 1, "rng": rng.get_state()}, last / "state.pt")


def climbing(env: ContractEnv) -> Any:
    from legorl_embedded.training.trainer import EmbeddedTrainer

    class Climbs(EmbeddedTrainer):
        """Steps along the loss's gradient instead of against it (a sign slip)."""

        def train_step(self, model: Any, opt: Any, rows: Any, loss_fn: Any, scoring: Any) -> Any:
            def negated(batch: Any) -> Any:
                loss, metrics = loss_fn(batch)
                return -loss, metrics

            return super().train_step(model, opt, rows, negated, scoring)

    return embedded(env, Climbs)


def forgetful(env: ContractEnv) -> Any:
    from legorl_embedded.training.trainer import EmbeddedTrainer

    class ForgetsOptimizer(EmbeddedTrainer):
        """Resumes the weights but not AdamW's moments."""

        def _resume(self, ctx: Any, model: Any, opt: Any, schedule: Any) -> int:
            first = super()._resume(ctx, model, opt, schedule)
            opt.state.clear()
            return first

    return embedded(env, ForgetsOptimizer)


# ------------------------------------------------------------------ trainer.trains


def test_a_trainer_that_does_nothing_fails_to_train(env):
    assert "reported 0 step events" in breach("trainer.trains", Idle(push=False), env)


def test_a_step_must_hand_inference_new_weights(env):
    assert "never handed weights" in breach("trainer.trains", Steps(push=False), env)
    assert "the weights did not change" in breach("trainer.trains", Steps(push=True), env)


def test_a_step_must_move_the_policy_towards_the_rewarded_replies(env):
    assert "rewarded replies less likely" in breach("trainer.trains", climbing(env), env)


# ------------------------------------------------------------------ trainer.resumes-bitwise


def test_a_resume_must_restore_the_optimizer_state(env):
    assert "final weights differ" in breach("trainer.resumes-bitwise", forgetful(env), env)


def test_a_resume_must_restore_the_random_state(env):
    contract_named("trainer.resumes-bitwise").check(Noisy(keeps_rng=True), env)
    assert "final weights differ" in breach("trainer.resumes-bitwise", Noisy(keeps_rng=False), env)


def test_a_resume_must_continue_after_the_checkpoint(env):
    assert "second step only" in breach("trainer.resumes-bitwise", Noisy(resumes=False), env)


# ------------------------------------------------------------------ the embedded trainer


@pytest.mark.parametrize("which", ["trainer.trains", "trainer.resumes-bitwise"])
def test_the_embedded_trainer_passes(env, which):
    contract_named(which).check(embedded(env), env)
