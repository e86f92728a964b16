"""The verl keys and the Ray start of a CPU run (rollout ``legorl-cpu``).

One actor worker (a logical Ray ``GPU``), verl's FSDP2 engine on gloo with eager attention and
no padding removal (flash-attention kernels only), one CPU rollout replica beside it, verl's v1
trainer (as on GPUs) with one TransferQueue storage unit.

The actor and reference compute in the model's dtype (``model.dtype``), the one the CPU rollout
samples in. verl's FSDP default is bf16 parameters under autocast: on a CPU without bf16 matrix
units that falls back to torch's reference gemm (every matmul of the 151,936-token output layer:
its update took 110-180 s a step alone on 2 cores), and it made the actor's log-probs differ
from the rollout's by bf16 rounding (k3 4e-4), not by the handed-over weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from legorl_verl.cpu import PLATFORM

ENV = {
    "VERL_USE_EXTERNAL_MODULES": "legorl_verl.cpu.register",
    "VERL_PLATFORM": PLATFORM,
    "TOKENIZERS_PARALLELISM": "false",
}
"""Environment of every verl process of a CPU run: our registrations load first."""


METRICS_FILE = "verl/metrics.jsonl"
"""Under the run directory: verl's own metrics, one line per step (its ``file`` logger)."""
ROLLOUTS_DIR = "verl/rollouts"
"""Under the run directory: verl's dump of each step's samples (``trainer.rollout_data_dir``)."""
WEIGHTS_FILE = "verl/rollout-weights.jsonl"
"""Under the run directory: each weight load of the CPU rollout server (version, checksums)."""


PRECISION = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
"""verl's name (``PrecisionType``) of each ``model.dtype``."""


def mixed_precision(dtype: str) -> dict[str, str]:
    """verl's FSDP ``mixed_precision`` for the actor and reference of a CPU run of ``model.dtype``."""
    return {"param_dtype": PRECISION[dtype], "reduce_dtype": "fp32", "buffer_dtype": "fp32"}


def values(workers: int, run_dir: Path, loggers: list[str]) -> dict[str, Any]:
    """verl config values a CPU run needs (on top of the spec's)."""
    return {
        "trainer.logger": [*loggers, "file"],
        "trainer.rollout_data_dir": str(run_dir / ROLLOUTS_DIR),
        "trainer.device": "cpu",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units": 1,
        "actor_rollout_ref.actor.strategy": "fsdp2",  # FSDP1 syncs module states on a GPU only
        "actor_rollout_ref.ref.strategy": "fsdp2",
        "actor_rollout_ref.model.external_lib": "legorl_verl.cpu.dist",
        "actor_rollout_ref.model.override_config": {"attn_implementation": "eager"},
        "actor_rollout_ref.model.use_remove_padding": False,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
        "actor_rollout_ref.rollout.free_cache_engine": False,
        "reward.num_workers": 1,
        # logical CPUs: every actor of verl's v1 (task runner, TransferQueue's controller and
        # storage, agent-loop and reward workers) must be placed, whatever the machine has
        "ray_kwargs.ray_init.num_cpus": 2 * workers + 8,
    }


def ray_init(cfg: Any) -> dict[str, Any]:
    """``ray.init`` arguments: a local cluster, one logical GPU per actor worker, our env."""
    trainer = cfg.trainer
    return {
        "num_cpus": int(cfg.ray_kwargs.ray_init.num_cpus),
        "num_gpus": int(trainer.n_gpus_per_node) * int(trainer.nnodes),
        "include_dashboard": False,
        "runtime_env": {"env_vars": {**ENV, "VERL_FILE_LOGGER_PATH": str(Path(cfg.legorl.run_dir) / METRICS_FILE)}},
    }
