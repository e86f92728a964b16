"""Options of the ``verl`` trainer plugin: pydantic only, so registering it is instant."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ParallelSizes(BaseModel):
    """How the actor is split over the GPUs (verl's megatron engine; fsdp takes context only)."""

    model_config = ConfigDict(extra="forbid")

    tensor: int = Field(default=1, ge=1, description="Tensor parallel size (megatron tensor_model_parallel_size).")
    expert: int = Field(default=1, ge=1, description="Expert parallel size (megatron expert_model_parallel_size).")
    expert_tensor: int | None = Field(
        default=None, ge=1, description="Expert tensor parallel size (megatron; none: the tensor size)."
    )
    pipeline: int = Field(default=1, ge=1, description="Pipeline parallel size (megatron).")
    context: int = Field(
        default=1,
        ge=1,
        description="Context parallel size: megatron context_parallel_size, fsdp's Ulysses sequence parallel.",
    )


class Offload(BaseModel):
    """What the actor moves to host memory while the rollout has the GPUs (verl's hybrid engine)."""

    model_config = ConfigDict(extra="forbid")

    params: bool = Field(default=False, description="Weights (and megatron's gradient buffers).")
    optimizer: bool = Field(default=False, description="Optimizer state.")


class VerlTrainerOptions(BaseModel):
    """Options of the ``verl`` trainer (verl's RayPPOTrainer with lego-rl trials as rollouts)."""

    model_config = ConfigDict(extra="forbid")

    strategy: Literal["fsdp", "megatron"] = Field(
        default="fsdp",
        description="verl training engine: fsdp (verl's 'dp' engine) or megatron. Routing replay "
        "(inference.options.enable_routing_replay) needs megatron in verl 0.9.",
    )
    nodes: int = Field(default=1, ge=1, description="Ray nodes (verl trainer.nnodes).")
    gpus_per_node: int = Field(default=8, ge=1, description="GPUs per node (verl trainer.n_gpus_per_node).")
    learning_rate: float = Field(default=1e-6, gt=0.0, description="Actor learning rate.")
    warmup_steps: int = Field(default=0, ge=0, description="Linear learning-rate warmup, in steps.")
    micro_batch_size: int = Field(
        default=1, ge=1, description="Sequences per GPU per forward/backward (and log-prob) pass."
    )
    gradient_checkpointing: bool = Field(
        default=True,
        description="Recompute activations in backward (less memory, slower): fsdp's gradient "
        "checkpointing, megatron's full recompute of every layer.",
    )
    routing_replay: Literal["off", "replay"] | None = Field(
        default=None,
        description="MoE models: the actor routes each token to the experts recorded at sampling "
        "(replay: verl's R3 on megatron; on a CPU, lego-rl's engine) or lets its routers choose "
        "(off). Default: replay when the rollout records routing (inference.options."
        "enable_routing_replay; the CPU rollout always does).",
    )
    parallel: ParallelSizes = Field(default_factory=ParallelSizes, description="Parallel sizes of the actor.")
    offload: Offload = Field(default_factory=Offload, description="Host offload of the actor during rollout.")
    gpu_memory_gb: float = Field(
        default=80.0,
        gt=0.0,
        description="Memory of one GPU in GB (1e9 bytes): `legorl plan` estimates the need per GPU "
        "from the model's config and refuses a layout that cannot fit.",
    )
    async_mode: Literal["none", "one-step-off", "fully-async"] = Field(
        default="none",
        description="none: generate, then train; one-step-off: rollout and training colocated, "
        "one batch ahead (verl colocate_async); fully-async: rollout on its own replicas with "
        "partial rollouts (verl separate_async).",
    )
    parameter_sync_steps: int = Field(
        default=1, ge=1, description="fully-async: trainer steps between weight syncs to the rollout."
    )
    prompt_length: int | None = Field(
        default=None,
        ge=1,
        description="verl's padded prompt width in tokens; default half of model.max_context. "
        "A trial's tokens past it go to the response side (mask 0 where not sampled).",
    )
    agent_workers: int = Field(
        default=8, ge=1, description="verl agent-loop workers (each runs its share of the trials)."
    )
    segments: Literal["last", "most-trained", "all"] = Field(
        default="last",
        description="A trajectory of several segments (the harness rewrote its history): all "
        "trains every segment (verl's v1 trainer takes a list of outputs per sample; each gets "
        "the trial's reward); last or most-trained trains one, the others are reported, not trained.",
    )
    save_every: int = Field(
        default=-1, description="Save a verl checkpoint every N steps (-1: only what verl does by default)."
    )
    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="Raw verl config keys (dotted, e.g. actor_rollout_ref.actor.ppo_epochs) applied "
        "last; a key verl does not have is an error.",
    )
