"""Options models of the embedded plugins: pydantic only, so registering them is instant.

The plugin modules that use them import torch and transformers, which take seconds; the
entry point (plugin.py) imports only this module and loads the rest on first build.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from legorl_embedded.objectives.correction_options import CorrectionOption


class HFInferenceOptions(BaseModel):
    """Options of the ``hf`` inference plugin."""

    model_config = ConfigDict(extra="forbid")

    dtype: Literal["float32", "bfloat16"] = Field(
        default="float32", description="Precision of the sampling copy of the weights."
    )
    threads: int | None = Field(
        default=None, ge=1, description="torch CPU threads (process-wide); none keeps torch's default."
    )
    device: Literal["cpu", "cuda", "auto"] = Field(
        default="auto", description="Where the model runs; auto picks cuda when a GPU is visible."
    )
    max_batch: int = Field(
        default=32, ge=1, description="Most concurrent calls decoded together in one batch (1: one at a time)."
    )
    prefix_cache_mb: int = Field(
        default=256,
        ge=0,
        description="Keys and values of recent prompts kept to skip re-prefilling a shared prefix "
        "(the harness's system prompt and tools, a session's earlier turns); 0: off.",
    )


class GRPOOptions(CorrectionOption):
    model_config = ConfigDict(extra="forbid")

    clip_low: float = Field(
        default=0.2, ge=0.0, le=1.0, description="Lower clip range of the ratio."
    )
    clip_high: float = Field(
        default=0.28, ge=0.0, description="Upper clip range (DAPO clip-higher)."
    )
    normalize_std: bool = Field(
        default=True, description="Divide advantages by the group's std (False: Dr. GRPO)."
    )
    aggregation: Literal["token-mean", "seq-mean-token-mean"] = Field(
        default="token-mean",
        description="token-mean: every trained token of the step weighs the same; "
        "seq-mean-token-mean: average per trial first, then over trials.",
    )
    kl_coef: float = Field(
        default=0.0,
        ge=0.0,
        description="Weight of a k3 KL penalty to the initial policy (0: none).",
    )


class GSPOOptions(BaseModel):
    """Options of the ``gspo`` optimizer (sequence-level ratio and clip)."""

    model_config = ConfigDict(extra="forbid")

    clip_low: float = Field(
        default=3e-4, ge=0.0, le=1.0, description="Lower clip range of the sequence ratio."
    )
    clip_high: float = Field(
        default=4e-4, ge=0.0, description="Upper clip range of the sequence ratio."
    )
    normalize_std: bool = Field(default=True, description="Divide advantages by the group's std.")
    kl_coef: float = Field(
        default=0.0, ge=0.0, description="Weight of a k3 KL penalty to the initial policy (0: none)."
    )
    tis_cap: float | None = Field(
        default=2.0,
        gt=0.0,
        description="Cap of the sequence-level trainer/inference importance weight; null disables it.",
    )


class PPOOptions(CorrectionOption):
    """Options of the ``ppo`` optimizer (critic-free PPO-clip)."""

    model_config = ConfigDict(extra="forbid")

    clip: float = Field(default=0.2, ge=0.0, le=1.0, description="Clip range of the token ratio.")
    dual_clip: float | None = Field(
        default=3.0,
        gt=1.0,
        description="Bound of the loss for negative advantages, as a ratio (null: no dual clip).",
    )
    baseline: Literal["leave-one-out", "group-mean"] = Field(
        default="leave-one-out",
        description="Reward baseline: the mean of the group's other trials (RLOO) or the group mean.",
    )
    aggregation: Literal["token-mean", "seq-mean-token-mean"] = Field(
        default="token-mean", description="Average per token of the step, or per trial first."
    )
    kl_coef: float = Field(
        default=0.0, ge=0.0, description="Weight of a k3 KL penalty to the initial policy (0: none)."
    )


class EmbeddedTrainerOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lr: float = Field(default=1e-4, gt=0.0, description="AdamW learning rate.")
    warmup_steps: int = Field(default=0, ge=0, description="Linear learning-rate warmup, in steps.")
    weight_decay: float = Field(default=0.0, ge=0.0)
    max_grad_norm: float = Field(default=1.0, gt=0.0, description="Gradient-norm clip.")
    micro_batch_tokens: int = Field(
        default=4096, ge=1, description="Padded tokens per forward/backward pass."
    )
    device: Literal["cpu", "cuda", "auto"] = "auto"
    checkpoint: Literal["final", "every", "none"] = Field(
        default="final",
        description="Write run_dir/checkpoints/final, one per step, or none (none also "
        "turns off the resumable state, see state_every).",
    )
    threads: int | None = Field(
        default=None, ge=1, description="torch CPU threads (default: torch's)."
    )
    routing_replay: Literal["off", "replay"] = Field(
        default="replay",
        description="MoE models: route each recorded token to the experts it was routed to at "
        "inference (replay) or let the trainer's routers choose (off). No effect on dense models.",
    )
    gradient_checkpointing: bool = Field(
        default=False, description="Recompute activations in backward (less memory, slower)."
    )
    state_every: int = Field(
        default=1,
        ge=0,
        description="Rewrite run_dir/checkpoints/last (model, optimizer, step, RNG, rollout "
        "position) every N steps, so a killed run can resume; 0 never.",
    )
