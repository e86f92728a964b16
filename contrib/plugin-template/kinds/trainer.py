"""The {{name}} trainer: the outer loop of a run (roll out, update, publish weights)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from lego_rl import hookimpl
from lego_rl.kinds import Problem, RunContext
from lego_rl.registry import BuildContext


class {{Class}}Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lr: float = Field(1e-5, gt=0)
    """Learning rate."""


class {{Class}}:
    """Steps through the run: each step rolls out groups, then (TODO) updates the policy."""

    def __init__(self, options: {{Class}}Options, ctx: BuildContext) -> None:
        self.options = options

    def preflight(self) -> list[Problem]:
        # Until run() updates the policy, contracts trainer.trains and trainer.resumes-bitwise
        # (a step must move the weights inference samples with towards the rewarded replies; a
        # resume must be bitwise) fail, and so does every run: say so here. Delete this once
        # the update is written.
        return [Problem("{{name}}: the policy update in run() is not written yet", "fill in {{package}}/plugin.py")]

    def run(self, ctx: RunContext) -> None:
        for step in range(ctx.spec.run.steps):
            groups = ctx.rollout(step)
            rewards = [r.reward for group in groups for r in group]
            ctx.event("step", step=step, reward_mean=sum(rewards) / max(len(rewards), 1))
            # TODO: advantages with ctx.optimizer, a gradient step on the recorded tokens, then
            # publish the new weights to ctx.inference (see legorl-embedded's trainer).

    # Optional capabilities (lego_rl.kinds; CONTRIBUTING.md "Optional capabilities").
    #
    # PlanDetails, on the factory: what `legorl plan` shows of this trainer (register a function
    # with a plan_details(options, ctx) -> dict attribute as the factory).
    #
    # Supervises: model.warmstart fine-tunes on recorded demonstrations first.
    # def supervise(self, demos: list[Any], plan: WarmstartSpec, target: Path, log) -> dict[str, float]: ...
    #
    # OwnsRollout: the trainer runs its own rollouts; apply builds no inference, proxy or pool.
    # owns_rollout: Literal[True] = True
    #
    # NeedsInference: what the trainer needs of ctx.inference (Protocols); plan refuses a spec
    # whose inference lacks one. A trainer that publishes weights needs LoadsWeights.
    # inference_needs: tuple[type, ...] = (LoadsWeights,)


@hookimpl
def legorl_register_trainer(register) -> None:
    register("{{name}}", {{Class}}, options={{Class}}Options)
