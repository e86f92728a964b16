"""The ``verl`` trainer: the spec as verl's config, the tasks as verl's dataset, verl's loop.

verl owns the outer loop (its RayPPOTrainer on Ray, FSDP or Megatron); rollouts are our
agent loop ``legorl`` (one trial per sample). The run context's own rollout pool and
inference are not used. With inference ``hf`` or ``scripted`` it runs on the CPU
(:mod:`legorl_verl.cpu`): Ray started here, verl's v1 trainer, the embedded inference as
its rollout server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lego_rl.kinds import Problem
from lego_rl.registry import BuildContext, default_registry
from lego_rl.spec.models import Spec
from lego_rl.spec.resolve import resolve
from legorl_verl.config import (
    CPU_ROLLOUT,
    TASKS_FILE,
    TranslationError,
    resolved,
    translate,
)
from legorl_verl.dataset import write_tasks
from legorl_verl.environment import problems as environment_problems
from legorl_verl.nodes import shared_path_problems
from legorl_verl.options import VerlTrainerOptions
from legorl_verl.sizing import Estimate, Layout, estimate, find_config, shape_of


class VerlTrainer:
    owns_rollout = True
    """``apply`` builds no inference, proxy or pool of its own for this trainer."""

    def __init__(self, options: VerlTrainerOptions, ctx: BuildContext):
        self.options, self.ctx = options, ctx

    def config(self, spec: Spec) -> Any:
        """verl's DictConfig for ``spec`` (raises TranslationError)."""
        run_dir = self.ctx.run_dir or spec.run.run_dir.resolve()
        spec_dir = self.ctx.spec_dir or Path.cwd()
        return translate(
            spec,
            self.options,
            run_dir=run_dir,
            spec_dir=spec_dir,
            optimizer=block_options(spec, "optimizer"),
            filter=block_options(spec, "filter"),
        )

    def preflight(self) -> list[Problem]:
        if self.ctx.spec is None:
            return []
        try:
            cfg = resolved(self.config(self.ctx.spec))
        except TranslationError as exc:
            return [Problem(f"{path}: {msg}", fix="see `legorl plan` for the verl config") for path, msg in exc.errors]
        if cfg["actor_rollout_ref"]["rollout"]["name"] == CPU_ROLLOUT:
            return []  # verl on this machine's CPU: a local Ray cluster, one actor worker
        return [
            Problem(
                "trainer verl runs on a Ray cluster of GPU nodes",
                fix=f"{self.options.nodes} node(s) x {self.options.gpus_per_node} GPU(s), Ray started",
                fatal=False,
            ),
            *self._memory_problems(cfg),
            *shared_path_problems(
                self.options.nodes,
                Path(cfg["legorl"]["run_dir"]),
                Path(cfg["legorl"]["spec_dir"]),
                self.ctx.spec.tasks.options,
            ),
            *environment_problems(self.options.strategy, self.options.overrides),
        ]

    def memory(self, cfg: dict[str, Any]) -> Estimate | str:
        """The GPU memory estimate of a resolved verl config, or why there is none."""
        assert self.ctx.spec is not None
        model = self.ctx.spec.model
        found = find_config(model.path, self.ctx.spec_dir or Path.cwd())
        if found is None:
            return (
                f"no config.json for model.path {model.path!r} here (neither a local checkpoint nor "
                "in the local hub cache)"
            )
        return estimate(shape_of(*found), Layout.of(cfg, self.options.gpu_memory_gb))

    def _memory_problems(self, cfg: dict[str, Any]) -> list[Problem]:
        est = self.memory(cfg)
        if isinstance(est, str):
            return [Problem(f"GPU memory per device not estimated: {est}", fix="legorl plan on a node with the checkpoint", fatal=False)]
        if est.fits:
            return []
        t, r = est.training["total"], est.rollout["total"]
        return [
            Problem(
                f"the run cannot fit its GPUs: {'; '.join(est.problems)} (training ~{t:.1f} GB, rollout "
                f"~{r:.1f} GB; {est.layout.describe()})",
                fix="raise trainer.options.parallel sizes (tensor, expert, pipeline, context), set "
                "trainer.options.offload, compute log-probs in chunks (trainer.options.overrides: "
                "{actor_rollout_ref.model.use_fused_kernels: true}), or lower "
                "inference.options.gpu_memory_utilization / model.max_context; `legorl plan` shows each term",
            )
        ]

    def plan_details(self, spec: Spec) -> dict[str, Any]:
        """The memory estimate per GPU and the resolved verl config that ``apply`` would launch."""
        cfg = resolved(self.config(spec))
        if cfg["actor_rollout_ref"]["rollout"]["name"] == CPU_ROLLOUT:
            return {"verl config": cfg}
        est = self.memory(cfg)
        return {"GPU memory per device": est if isinstance(est, str) else est.as_dict(), "verl config": cfg}

    def run(self, ctx: Any) -> None:
        from verl.trainer.main_ppo import main

        cfg = self.config(ctx.spec)
        resolved(cfg)
        tasks = ctx.filter.select_tasks(self._tasks(ctx.spec))
        write_tasks(tasks, Path(cfg.legorl.run_dir) / TASKS_FILE)
        ctx.log(f"verl: {len(tasks)} tasks, {ctx.spec.run.steps} steps")
        if cfg.actor_rollout_ref.rollout.name == CPU_ROLLOUT:
            run_on_cpu(cfg)
            return
        main(cfg)

    def _tasks(self, spec: Spec) -> list[Any]:
        registry = default_registry()
        block = resolve(spec, registry).block("tasks")
        return registry.build("tasks", block.block.plugin, block.options, self.ctx).tasks()


def run_on_cpu(cfg: Any) -> None:
    """verl's own launcher (``main_ppo.main``'s steps) on a local Ray cluster started here, with
    the CPU registrations loaded in every process."""
    import os

    import ray
    from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
    from verl.trainer.main_ppo_v0 import TaskRunner
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from legorl_verl.cpu.config import ENV, ray_init

    os.environ.update(ENV)
    import legorl_verl.cpu.register  # noqa: F401 - this process's registrations

    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    started = not ray.is_initialized()
    if started:
        ray.init(**ray_init(cfg))
    try:
        run_ppo(cfg, task_runner_class=TaskRunnerV1 if cfg.trainer.use_v1 else TaskRunner)
    finally:
        if started:
            ray.shutdown()


def block_options(spec: Spec, kind: str) -> dict[str, Any]:
    """A block's options with its plugin's defaults when the plugin is installed here."""
    block = getattr(spec, kind)
    try:
        return default_registry().options(kind, block.plugin, block.options).model_dump()
    except Exception:  # noqa: BLE001 - plugin not installed here: the options as written
        return dict(block.options)

