"""The spec translated into verl's own Hydra config.

verl's shipped ``ppo_trainer.yaml`` is composed offline (no verl import: only its config
directory is located), then every value the spec decides is set on it, then the person's raw
``trainer.options.overrides``. Key names are verl 0.9.1's; a combination verl cannot run is a
:class:`TranslationError` naming the spec path.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lego_rl.spec.models import Spec
from legorl_verl.correction import rollout_correction
from legorl_verl.options import VerlTrainerOptions

AGENT_NAME = "legorl"
"""The name our agent loop is registered under in verl's agent-loop registry."""

CPU_ROLLOUT = "legorl-cpu"
"""verl rollout name of the CPU rollout (:mod:`legorl_verl.cpu`)."""

ROLLOUT_BACKENDS = {"vllm": "vllm", "sglang": "sglang", "hf": CPU_ROLLOUT, "scripted": CPU_ROLLOUT}
"""Inference plugin name -> verl rollout backend it drives (hf, scripted: the embedded
inference as a CPU rollout server, for CPU runs of verl's trainer)."""

INFERENCE_KEYS = {
    "tensor_parallel_size": "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "gpu_memory_utilization": "actor_rollout_ref.rollout.gpu_memory_utilization",
    "max_num_seqs": "actor_rollout_ref.rollout.max_num_seqs",
    "max_num_batched_tokens": "actor_rollout_ref.rollout.max_num_batched_tokens",
    "enforce_eager": "actor_rollout_ref.rollout.enforce_eager",
    "data_parallel_size": "actor_rollout_ref.rollout.data_parallel_size",
    "expert_parallel_size": "actor_rollout_ref.rollout.expert_parallel_size",
}
"""Inference block options verl's rollout honours -> their verl key."""

INFERENCE_IGNORED = frozenset(
    {
        "enable_routing_replay", "prompt_routing", "url", "served_model_name", "api_key",
        "executable", "host", "port", "env", "startup_timeout_s", "log_file",
        "request_timeout_s", "connect_timeout_s", "stream", "weight_sync", "weights_dir",
        "weights_dtype",
    }
)
"""Options of a standalone inference server (the vllm plugin's) that mean nothing when verl
starts and updates its own rollout servers (routing replay is read separately)."""

ASYNC_MODES = {"none": "sync", "one-step-off": "colocate_async", "fully-async": "separate_async"}

TASKS_FILE = "verl/tasks.parquet"
"""Where, under the run directory, the trainer writes the tasks as verl's dataset."""

AGENT_LOOPS_FILE = Path(__file__).with_name("agent_loops.yaml")


class TranslationError(Exception):
    """The spec asks for something verl cannot run; ``errors`` holds (spec path, message)."""

    def __init__(self, errors: list[tuple[str, str]]):
        self.errors = errors
        super().__init__("; ".join(f"{path}: {msg}" for path, msg in errors))


def config_dir() -> Path:
    """verl's shipped Hydra config directory, found without importing verl (seconds)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise TranslationError([("trainer.plugin", "verl is not installed (pip install verl==0.9.1)")])
    return Path(next(iter(spec.submodule_search_locations))) / "trainer" / "config"


def compose_base(strategy: str) -> DictConfig:
    """verl's ``ppo_trainer`` config for a training engine, as verl's own launcher composes it."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    engine = {"fsdp": "dp", "megatron": "megatron"}[strategy]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=[f"model_engine={engine}"])
    OmegaConf.set_struct(cfg, False)
    return cfg


def translate(
    spec: Spec,
    options: VerlTrainerOptions,
    *,
    run_dir: Path,
    spec_dir: Path,
    optimizer: Mapping[str, Any],
    filter: Mapping[str, Any],
) -> DictConfig:
    """The full verl config of ``spec``; ``optimizer``/``filter``: their blocks' options with
    defaults. Raises :class:`TranslationError` with every problem at once."""
    errors: list[tuple[str, str]] = []
    values: dict[str, Any] = {}
    values.update(_model(spec, errors))
    values.update(_rollout(spec, options, errors))
    values.update(_batches(spec, options))
    values.update(_layout(options, errors))
    values.update(_objective(spec.optimizer.plugin, optimizer, errors))
    values.update(_filter(spec, filter))
    values.update(_trainer(spec, options, run_dir))
    if spec.run.subagents == "train":
        errors.append(
            (
                "run.subagents",
                "verl trains the main agent's trajectory of each trial (its agent loop's outputs); sub-agent "
                "trajectories are kept in the results only: use subagents: drop, or the embedded trainer",
            )
        )
    values["data.train_files"] = values["data.val_files"] = str(run_dir / TASKS_FILE)
    if values.get("actor_rollout_ref.rollout.name") == CPU_ROLLOUT:
        values.update(_cpu(options, errors, run_dir, values["trainer.logger"]))
    if errors:
        raise TranslationError(errors)

    cfg = compose_base(options.strategy)
    for key, value in values.items():
        if not _has(cfg, key):
            raise KeyError(f"legorl-verl sets {key}, which verl's config does not have")
        OmegaConf.update(cfg, key, value, merge=False)
    for key, value in options.overrides.items():
        if not _has(cfg, key):
            errors.append(
                (f"trainer.options.overrides.{key}", "verl 0.9.1's config has no such key")
            )
            continue
        OmegaConf.update(cfg, key, value, merge=True)
    if options.segments == "all" and not cfg.trainer.use_v1:
        errors.append(
            ("trainer.options.segments", "all segments of a trajectory need verl's v1 trainer (trainer.use_v1)")
        )
    if values["actor_rollout_ref.rollout.name"] != CPU_ROLLOUT:
        errors.extend(replica_errors(cfg, given="tensor_parallel_size" in spec.inference.options))
    if errors:
        raise TranslationError(errors)
    cfg.legorl = {
        "spec": spec.model_dump(mode="json"),
        "spec_dir": str(spec_dir),
        "run_dir": str(run_dir),
        "segments": options.segments,
    }
    if cfg.actor_rollout_ref.rollout.name == CPU_ROLLOUT:  # the CPU server builds its inference from it
        cfg.actor_rollout_ref.rollout.custom = {"legorl": cfg.legorl}
        from legorl_verl.cpu.config import mixed_precision

        replay = _cpu_replay(options)
        precision = mixed_precision(spec.model.dtype)
        for role in ("actor", "ref"):  # fields of verl's EngineConfig its fsdp yaml leaves out
            OmegaConf.update(cfg, f"actor_rollout_ref.{role}.fsdp_config.router_replay", replay, merge=False)
            OmegaConf.update(cfg, f"actor_rollout_ref.{role}.fsdp_config.mixed_precision", dict(precision), merge=False)
    return cfg


def _cpu(
    options: VerlTrainerOptions, errors: list[tuple[str, str]], run_dir: Path, loggers: list[str]
) -> dict[str, Any]:
    from legorl_verl.cpu.config import values

    if options.nodes * options.gpus_per_node != 1:
        errors.append(
            (
                "trainer.options.gpus_per_node",
                "the CPU rollout (inference hf or scripted) runs verl with one actor worker: "
                "set trainer.options.nodes: 1 and gpus_per_node: 1",
            )
        )
    if options.strategy != "fsdp":
        errors.append(("trainer.options.strategy", "verl on a CPU runs its fsdp engine (megatron needs CUDA)"))
    return values(options.agent_workers, run_dir, loggers)


def _cpu_replay(options: VerlTrainerOptions) -> dict[str, Any]:
    """verl's ``router_replay`` engine config for the CPU engine (legorl_verl.cpu.engine): R3
    unless replay is off (the CPU rollout always records routing)."""
    return {
        "_target_": "verl.workers.config.EngineRouterReplayConfig",
        "mode": "disabled" if options.routing_replay == "off" else "R3",
        "record_file": None,
        "replay_file": None,
    }


def resolved(cfg: DictConfig) -> dict[str, Any]:
    """The config with every interpolation resolved; raises if a value is left undecided."""
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise TranslationError([("trainer", f"verl keys left undecided (???): {', '.join(missing)}")])
    data = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(data, dict)
    left = [path for path, value in _leaves(data) if isinstance(value, str) and "${" in value]
    if left:
        raise TranslationError([("trainer", f"verl keys left unresolved: {', '.join(left)}")])
    return data


def _has(cfg: DictConfig, key: str) -> bool:
    """Whether verl's config has ``key`` (dotted), a ``???`` value included."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent, throw_on_missing=False) if parent else cfg
    return isinstance(node, DictConfig) and leaf in node.keys()  # noqa: SIM118 - `in` skips ??? values


def _leaves(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(data, dict):
        return [leaf for k, v in data.items() for leaf in _leaves(v, f"{prefix}{k}.")]
    if isinstance(data, list):
        return [leaf for i, v in enumerate(data) for leaf in _leaves(v, f"{prefix}{i}.")]
    return [(prefix.rstrip("."), data)]


def _model(spec: Spec, errors: list[tuple[str, str]]) -> dict[str, Any]:
    model = spec.model
    if not model.path:
        errors.append(
            ("model.path", "verl trains pretrained weights: set model.path to a checkpoint directory or hub id")
        )
    tokenizer = None if model.tokenizer in ("qwen3", model.path) else model.tokenizer
    return {
        "actor_rollout_ref.model.path": model.path or "",
        "actor_rollout_ref.model.tokenizer_path": tokenizer,
        "actor_rollout_ref.rollout.dtype": model.dtype,
        "actor_rollout_ref.rollout.max_model_len": model.max_context,
    }


def _rollout(spec: Spec, options: VerlTrainerOptions, errors: list[tuple[str, str]]) -> dict[str, Any]:
    inference = spec.inference
    backend = ROLLOUT_BACKENDS.get(inference.plugin)
    if backend is None:
        errors.append(
            (
                "inference.plugin",
                (
                    f"trainer verl generates with its own rollout servers; inference "
                    f"{inference.plugin!r} cannot be driven by verl (use one of: "
                    f"{', '.join(ROLLOUT_BACKENDS)})"
                ),
            )
        )
    values: dict[str, Any] = {
        "actor_rollout_ref.rollout.name": backend or "",
        "reward.reward_model.rollout.name": backend or "",
        "actor_rollout_ref.rollout.temperature": spec.run.temperature,
        "actor_rollout_ref.rollout.calculate_log_probs": True,
        "actor_rollout_ref.rollout.agent.default_agent_loop": AGENT_NAME,
        "actor_rollout_ref.rollout.agent.agent_loop_config_path": str(AGENT_LOOPS_FILE),
        "actor_rollout_ref.rollout.agent.num_workers": options.agent_workers,
        "actor_rollout_ref.rollout.seed": spec.run.seed,
    }
    # the CPU rollout's options are the embedded inference plugin's own (its server reads them)
    for key, value in inference.options.items() if backend != CPU_ROLLOUT else ():
        if key in INFERENCE_KEYS:
            values[INFERENCE_KEYS[key]] = value
        elif key not in INFERENCE_IGNORED:
            errors.append(
                (
                    f"inference.options.{key}",
                    (
                        f"not supported under trainer verl (verl's rollout takes: "
                        f"{', '.join(sorted(INFERENCE_KEYS))}, enable_routing_replay; other verl "
                        "rollout keys go in trainer.options.overrides)"
                    ),
                )
            )
    cpu = backend == CPU_ROLLOUT
    recorded = cpu or bool(inference.options.get("enable_routing_replay", False))
    replay = recorded if options.routing_replay is None else options.routing_replay == "replay"
    if replay and not recorded:
        errors.append(
            (
                "trainer.options.routing_replay",
                "replay needs the rollout to return each token's routed experts: set "
                "inference.options.enable_routing_replay: true",
            )
        )
    values["actor_rollout_ref.rollout.enable_rollout_routing_replay"] = recorded
    if replay and options.strategy != "megatron" and not cpu:
        errors.append(
            (
                "trainer.options.strategy",
                (
                    "routing replay (inference.options.enable_routing_replay) needs strategy "
                    "megatron: verl 0.9.1 replays rollout routing (router_replay mode R3) on its "
                    "megatron and veomni engines only (on a CPU, lego-rl's engine replays it)"
                ),
            )
        )
    if options.strategy == "megatron":
        values["actor_rollout_ref.actor.megatron.router_replay.mode"] = "R3" if replay else "disabled"
    return values


def lengths(spec: Spec, options: VerlTrainerOptions) -> tuple[int, int]:
    """(prompt, response) widths of verl's padded batch: together the model's whole context."""
    prompt = options.prompt_length or spec.model.max_context // 2
    prompt = min(prompt, spec.model.max_context - 1)
    return prompt, spec.model.max_context - prompt


def _batches(spec: Spec, options: VerlTrainerOptions) -> dict[str, Any]:
    run = spec.run
    prompt, response = lengths(spec, options)
    micro = options.micro_batch_size
    mode = ASYNC_MODES[options.async_mode]
    return {
        "data.train_batch_size": run.tasks_per_step,
        "data.max_prompt_length": prompt,
        "data.max_response_length": response,
        "data.seed": run.seed,
        "data.truncation": "left",
        "data.filter_overlong_prompts": False,
        "actor_rollout_ref.rollout.n": run.group_size,
        "actor_rollout_ref.actor.ppo_mini_batch_size": run.tasks_per_step,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": spec.model.max_context * micro,
        "actor_rollout_ref.actor.data_loader_seed": run.seed,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.actor.optim.lr": options.learning_rate,
        "actor_rollout_ref.actor.optim.lr_warmup_steps": options.warmup_steps or -1,
        "actor_rollout_ref.actor.strategy": options.strategy,
        "trainer.v1.trainer_mode": mode,
        "trainer.v1.separate_async.parameter_sync_step": options.parameter_sync_steps,
        "actor_rollout_ref.hybrid_engine": mode != "separate_async",
    }


def _layout(options: VerlTrainerOptions, errors: list[tuple[str, str]]) -> dict[str, Any]:
    """Parallel sizes, offload and recompute, as the keys the chosen engine reads."""
    sizes, actor = options.parallel, "actor_rollout_ref.actor."
    world = options.nodes * options.gpus_per_node
    if options.strategy == "fsdp":
        for name in ("tensor", "expert", "pipeline"):
            if getattr(sizes, name) != 1 or sizes.expert_tensor not in (None, 1):
                errors.append(
                    (f"trainer.options.parallel.{name}", "strategy fsdp shards over all GPUs: only context is a size")
                )
                break
        if world % sizes.context:
            errors.append(("trainer.options.parallel.context", f"{world} GPU(s) do not divide by context {sizes.context}"))
        return {
            "actor_rollout_ref.model.enable_gradient_checkpointing": options.gradient_checkpointing,
            actor + "ulysses_sequence_parallel_size": sizes.context,
            actor + "fsdp_config.ulysses_sequence_parallel_size": sizes.context,
            actor + "fsdp_config.param_offload": options.offload.params,
            actor + "fsdp_config.optimizer_offload": options.offload.optimizer,
        }
    expert_tensor = sizes.expert_tensor or sizes.tensor
    for what, group in (
        ("tensor x pipeline x context", sizes.tensor * sizes.pipeline * sizes.context),
        ("expert x expert_tensor x pipeline", sizes.expert * expert_tensor * sizes.pipeline),
    ):
        if world % group:
            errors.append(
                ("trainer.options.parallel", f"{what} = {group} does not divide the {world} GPU(s) of the run")
            )
    megatron = actor + "megatron."
    recompute = megatron + "override_transformer_config."
    return {
        megatron + "tensor_model_parallel_size": sizes.tensor,
        megatron + "expert_model_parallel_size": sizes.expert,
        megatron + "expert_tensor_parallel_size": sizes.expert_tensor,
        megatron + "pipeline_model_parallel_size": sizes.pipeline,
        megatron + "context_parallel_size": sizes.context,
        megatron + "param_offload": options.offload.params,
        megatron + "optimizer_offload": options.offload.optimizer,
        # megatron reads no gradient-checkpointing flag: its recompute is the transformer config's
        recompute + "recompute_granularity": "full" if options.gradient_checkpointing else None,
        recompute + "recompute_method": "uniform" if options.gradient_checkpointing else None,
        recompute + "recompute_num_layers": 1 if options.gradient_checkpointing else None,
    }


def replica_errors(cfg: DictConfig, *, given: bool) -> list[tuple[str, str]]:
    """verl makes ``GPUs // (tensor x data x pipeline)`` rollout replicas: none, or GPUs left
    over, is a run that cannot start (verl's default tensor size 2 on one GPU gives none)."""
    rollout, trainer = cfg.actor_rollout_ref.rollout, cfg.trainer
    world = int(trainer.nnodes) * int(trainer.n_gpus_per_node)
    size = (
        int(rollout.tensor_model_parallel_size)
        * int(rollout.data_parallel_size)
        * int(rollout.pipeline_model_parallel_size)
    )
    if size <= world and world % size == 0:
        return []
    return [
        (
            "inference.options.tensor_parallel_size",
            f"verl's rollout replica spans {size} GPU(s) (tensor x data x pipeline parallel), which "
            f"does not divide the run's {world} GPU(s): {world // size} replica(s)"
            + ("" if given else f" (verl's default tensor size {rollout.tensor_model_parallel_size}: set it)"),
        )
    ]


def _objective(name: str, opts: Mapping[str, Any], errors: list[tuple[str, str]]) -> dict[str, Any]:
    """The optimizer block as verl's advantage estimator, policy loss and rollout correction."""
    actor = "actor_rollout_ref.actor."
    if name not in ("grpo", "gspo", "ppo"):
        errors.append(("optimizer.plugin", f"trainer verl runs grpo, gspo or ppo, not {name!r}"))
        return {}
    kl = float(opts.get("kl_coef", 0.0))
    values: dict[str, Any] = {
        actor + "use_kl_loss": kl > 0,
        actor + "kl_loss_coef": kl,
        actor + "kl_loss_type": "low_var_kl",
        "algorithm.use_kl_in_reward": False,
    }
    if name == "ppo":
        clip = float(opts.get("clip", 0.2))
        baseline = opts.get("baseline", "leave-one-out")
        dual = opts.get("dual_clip", 3.0)
        values |= {
            "algorithm.adv_estimator": "rloo" if baseline == "leave-one-out" else "grpo",
            "algorithm.norm_adv_by_std_in_grpo": False,
            actor + "policy_loss.loss_mode": "vanilla",
            actor + "clip_ratio": clip,
            actor + "clip_ratio_low": clip,
            actor + "clip_ratio_high": clip,
            actor + "clip_ratio_c": float(dual) if dual is not None else 1e9,
            actor + "loss_agg_mode": opts.get("aggregation", "token-mean"),
        }
        level = "token"
    else:
        gspo = name == "gspo"
        values |= {
            "algorithm.adv_estimator": "grpo",
            "algorithm.norm_adv_by_std_in_grpo": bool(opts.get("normalize_std", True)),
            actor + "policy_loss.loss_mode": "gspo" if gspo else "vanilla",
            actor + "clip_ratio_low": float(opts.get("clip_low", 3e-4 if gspo else 0.2)),
            actor + "clip_ratio_high": float(opts.get("clip_high", 4e-4 if gspo else 0.28)),
            actor + "loss_agg_mode": "seq-mean-token-mean" if gspo else opts.get("aggregation", "token-mean"),
        }
        level = "sequence" if gspo else "token"
    return values | rollout_correction(opts, level, errors)


def _filter(spec: Spec, opts: Mapping[str, Any]) -> dict[str, Any]:
    """Online group filtering as verl's DAPO-style ``algorithm.filter_groups``.

    pass-rate's task selection happens before verl sees the tasks (the dataset holds only the
    kept ones); resampling uniform groups is verl's filter_groups on the reward."""
    name = spec.filter.plugin
    online = name == "group-variance" or (name == "pass-rate" and opts.get("resample_uniform", False))
    extra = float(opts.get("max_extra", 1.0))
    enable = online and extra > 0
    return {
        "algorithm.filter_groups.enable": enable,
        "algorithm.filter_groups.metric": "reward",
        "algorithm.filter_groups.max_num_gen_batches": 1 + math.ceil(extra) if enable else 0,
    }


def _trainer(spec: Spec, options: VerlTrainerOptions, run_dir: Path) -> dict[str, Any]:
    loggers = ["console"] + [b.plugin for b in spec.observer if b.plugin in ("wandb", "tensorboard")]
    return {
        "trainer.nnodes": options.nodes,
        "trainer.n_gpus_per_node": options.gpus_per_node,
        "trainer.total_training_steps": spec.run.steps,
        "trainer.total_epochs": max(1, spec.run.steps),
        "trainer.project_name": "lego-rl",
        "trainer.experiment_name": spec.run.name,
        "trainer.logger": loggers,
        "trainer.default_local_dir": str(run_dir / "verl" / "checkpoints"),
        "trainer.resume_mode": "auto" if spec.run.resume else "disable",
        "trainer.save_freq": options.save_every,
        "trainer.val_before_train": False,
        "trainer.test_freq": -1,
        "trainer.use_v1": True,
    }
