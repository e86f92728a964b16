"""GPU memory per device of a verl run, estimated before anything starts.

Parameters are counted, not guessed: the model's own config is built on torch's ``meta``
device (no memory, any architecture transformers knows) and its parameters are split into
routed experts and the rest by name. The layout is read from the resolved verl config, so raw
``overrides`` count too. Two phases share each GPU in verl's hybrid engine:

- training: bf16 weights, fp32 gradients, the optimizer's fp32 master copy and two moments
  (megatron's distributed optimizer shards them over data parallel; fsdp shards everything,
  fp32 weights included), activations of one micro-batch (all of them, or with recompute one
  layer input a layer plus one layer's working set), the logits unless fused kernels compute
  log-probs in chunks, a reference model's weights when a KL term needs one;
- rollout: vLLM's share (``gpu_memory_utilization``; it must hold its weights and a KV cache of
  one full-length sequence) beside what the actor keeps on the GPU while it sleeps (what
  ``offload`` does not move to the host).

Each phase adds a reserve for the CUDA context, communication buffers and fragmentation. It is
an estimate (±25%): linear-attention state, MoE dispatch buffers and pipeline bubbles are left
out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

GB = 1e9
RESERVE_GB = 3.0
"""CUDA context, NCCL buffers and the allocator's pools, per GPU."""
FRAGMENTATION = 0.10
"""Share added for the caching allocator's fragmentation."""
REFERENCE_CONFIGS = Path(__file__).with_name("reference_configs.json")
"""Public configs of models a shipped spec names, for a machine without the checkpoint."""
_EXPERT = re.compile(r"\.experts(\.|$)")


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs of a model, from its config."""

    params: int
    expert_params: int
    embedding_params: int
    layers: int
    hidden: int
    vocab: int
    experts: int
    experts_per_token: int
    expert_ffn: int
    shared_ffn: int
    dense_ffn: int
    attention_layers: int
    heads: int
    kv_heads: int
    head_dim: int
    source: str

    @property
    def active_params(self) -> int:
        if not self.experts:
            return self.params
        return self.params - self.expert_params + self.expert_params * self.experts_per_token // self.experts


@dataclass(frozen=True)
class Layout:
    """How verl splits the run over GPUs: read from its resolved config."""

    strategy: str
    gpus: int
    gpu_gb: float
    tensor: int = 1
    expert: int = 1
    expert_tensor: int = 1
    pipeline: int = 1
    context: int = 1
    distributed_optimizer: bool = True
    offload_params: bool = False
    offload_optimizer: bool = False
    recompute: bool = True
    fused_logits: bool = False
    micro_tokens: int = 0
    reference: bool = False
    rollout_tensor: int = 1
    rollout_share: float = 0.5
    max_model_len: int = 0

    @classmethod
    def of(cls, cfg: dict[str, Any], gpu_gb: float) -> Layout:
        """The layout of a resolved verl config (``legorl_verl.config.resolved``)."""
        aref = cfg["actor_rollout_ref"]
        actor, rollout, model, data = aref["actor"], aref["rollout"], aref["model"], cfg["data"]
        if actor["use_dynamic_bsz"]:
            tokens = int(actor["ppo_max_token_len_per_gpu"])
        else:
            length = int(data["max_prompt_length"]) + int(data["max_response_length"])
            tokens = int(actor["ppo_micro_batch_size_per_gpu"]) * length
        common: dict[str, Any] = {
            "gpus": int(cfg["trainer"]["nnodes"]) * int(cfg["trainer"]["n_gpus_per_node"]),
            "gpu_gb": gpu_gb,
            "fused_logits": bool(actor.get("use_fused_kernels", model.get("use_fused_kernels"))),
            "micro_tokens": tokens,
            "reference": bool(actor.get("use_kl_loss")) or bool(cfg["algorithm"].get("use_kl_in_reward")),
            "rollout_tensor": int(rollout["tensor_model_parallel_size"]),
            "rollout_share": float(rollout["gpu_memory_utilization"]),
            "max_model_len": int(rollout.get("max_model_len") or tokens),
        }
        if actor["strategy"] == "megatron":
            mc = actor["megatron"]
            tensor = int(mc["tensor_model_parallel_size"])
            return cls(
                strategy="megatron",
                tensor=tensor,
                expert=int(mc["expert_model_parallel_size"]),
                expert_tensor=int(mc["expert_tensor_parallel_size"] or tensor),
                pipeline=int(mc["pipeline_model_parallel_size"]),
                context=int(mc["context_parallel_size"]),
                distributed_optimizer=bool(mc["use_distributed_optimizer"]),
                offload_params=bool(mc["param_offload"]),
                offload_optimizer=bool(mc["optimizer_offload"]),
                recompute=mc["override_transformer_config"].get("recompute_granularity") == "full",
                **common,
            )
        fc = actor["fsdp_config"]
        return cls(
            strategy="fsdp",
            context=int(fc.get("ulysses_sequence_parallel_size") or 1),
            offload_params=bool(fc["param_offload"]),
            offload_optimizer=bool(fc["optimizer_offload"]),
            recompute=bool(model["enable_gradient_checkpointing"]),
            **common,
        )

    def describe(self) -> str:
        if self.strategy == "fsdp":
            sizes = f"fsdp over {self.gpus}, context (ulysses) {self.context}"
        else:
            sizes = (
                f"tensor {self.tensor}, expert {self.expert}, expert-tensor {self.expert_tensor}, "
                f"pipeline {self.pipeline}, context {self.context} (data {self.data_parallel})"
            )
        offload = [n for n, on in (("params", self.offload_params), ("optimizer", self.offload_optimizer)) if on]
        return (
            f"{self.gpus} GPU(s) of {self.gpu_gb:g} GB; {sizes}; offload: {', '.join(offload) or 'none'}; "
            f"recompute: {'full' if self.recompute else 'none'}; micro-batch {self.micro_tokens} tokens; "
            f"rollout tensor {self.rollout_tensor} at {self.rollout_share:g} of the GPU"
        )

    @property
    def data_parallel(self) -> int:
        return max(1, self.gpus // (self.tensor * self.pipeline * self.context))


@dataclass
class Estimate:
    """GB per GPU, term by term, of both phases."""

    shape: ModelShape
    layout: Layout
    training: dict[str, float] = field(default_factory=dict)
    rollout: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        s = self.shape
        return {
            "model": (
                f"{s.params / 1e9:.2f}B parameters ({s.expert_params / 1e9:.2f}B in {s.experts} routed "
                f"experts, {s.active_params / 1e9:.2f}B active a token), {s.layers} layers; config: {s.source}"
            ),
            "layout": self.layout.describe(),
            "training GB per GPU": _rounded(self.training),
            "rollout GB per GPU": _rounded(self.rollout),
            "verdict": "fits" if self.fits else "does not fit: " + "; ".join(self.problems),
            "how": "an estimate (±25%), legorl_verl.sizing",
        }


def _rounded(terms: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 1) for k, v in terms.items()}


def estimate(shape: ModelShape, layout: Layout) -> Estimate:
    """Both phases' GB per GPU and, if any exceeds the GPU, why."""
    est = Estimate(shape, layout)
    if layout.strategy == "megatron":
        for what, count, size in (
            ("routed experts", shape.experts, layout.expert),
            ("attention heads", shape.heads, layout.tensor),
            ("layers", shape.layers, layout.pipeline),
        ):
            if count and count % size:
                est.problems.append(f"{count} {what} do not split evenly over a parallel size of {size}")
    weights = _actor_weights(shape, layout)
    train = est.training
    if layout.strategy == "fsdp":
        train["weights (fp32)"] = 4 * weights / GB
        train["gradients (fp32)"] = 4 * weights / GB
        train["optimizer (fp32 moments)"] = 8 * weights / GB
        train["gathered layer (bf16, prefetch x2)"] = 2 * 2 * shape.params / max(1, shape.layers) / GB
    else:
        train["weights (bf16)"] = 2 * weights / GB
        train["gradients (fp32)"] = 4 * weights / GB
        train["optimizer (fp32 master, moments)"] = 12 * _optimizer_share(shape, layout) / GB
    if layout.reference:
        train["reference weights (bf16)"] = 2 * weights / GB
    train["activations"] = _activations(shape, layout) / GB
    train["logits"] = _logits(shape, layout) / GB
    _total(train)

    roll = est.rollout
    roll["vLLM share"] = layout.rollout_share * layout.gpu_gb
    if not layout.offload_params:
        resident = {k: v for k, v in train.items() if k.startswith(("weights", "gradients", "reference"))}
        roll["actor weights and gradients (not offloaded)"] = sum(resident.values())
    if not layout.offload_optimizer:
        roll["optimizer (not offloaded)"] = next(v for k, v in train.items() if k.startswith("optimizer"))
    _total(roll)

    for phase, terms in (("training", train), ("rollout", roll)):
        if terms["total"] > layout.gpu_gb:
            est.problems.append(f"{phase} needs ~{terms['total']:.1f} GB per GPU > {layout.gpu_gb:g} GB")
    vllm_weights = 2 * shape.params / layout.rollout_tensor / GB
    kv = _kv_bytes_per_token(shape, layout) * layout.max_model_len / GB
    if vllm_weights + kv > roll["vLLM share"]:
        est.problems.append(
            f"vLLM's share {roll['vLLM share']:.1f} GB cannot hold its weights ({vllm_weights:.1f} GB at "
            f"tensor {layout.rollout_tensor}) and one {layout.max_model_len}-token sequence's KV cache ({kv:.1f} GB)"
        )
    return est


def _total(terms: dict[str, float]) -> None:
    subtotal = sum(terms.values())
    terms["reserve (context, buffers, fragmentation)"] = RESERVE_GB + FRAGMENTATION * subtotal
    terms["total"] = sum(terms.values())


def _actor_weights(shape: ModelShape, layout: Layout) -> float:
    """Parameters one GPU holds of the actor (the heaviest pipeline stage)."""
    if layout.strategy == "fsdp":
        return shape.params / layout.gpus
    dense = shape.params - shape.expert_params - shape.embedding_params
    # a stage holds its layers' share; the first/last stage adds the input embedding/output head
    embedding = shape.embedding_params if layout.pipeline == 1 else shape.embedding_params / 2
    experts = shape.expert_params / (layout.expert * layout.expert_tensor * layout.pipeline)
    return (dense / layout.pipeline + embedding) / layout.tensor + experts


def _optimizer_share(shape: ModelShape, layout: Layout) -> float:
    """Parameters whose optimizer state one GPU keeps (megatron's distributed optimizer)."""
    if not layout.distributed_optimizer:
        return _actor_weights(shape, layout)
    experts = shape.expert_params / (layout.expert * layout.expert_tensor * layout.pipeline)
    expert_data = max(1, layout.gpus // (layout.expert * layout.expert_tensor * layout.pipeline))
    dense = _actor_weights(shape, layout) - experts
    return dense / (layout.data_parallel * layout.context) + experts / expert_data


def _layer_bytes_per_token(shape: ModelShape) -> float:
    """Activations a layer keeps for backward, bytes per token (bf16): attention with flash
    attention (no sequence-squared term), each routed copy through a SwiGLU expert, the shared
    expert or the dense MLP."""
    h = shape.hidden
    attention = 16 * h
    routed = shape.experts_per_token * (2 * h + 6 * shape.expert_ffn) if shape.experts else 0
    mlp = 2 * h + 6 * (shape.shared_ffn or shape.dense_ffn) if (shape.shared_ffn or shape.dense_ffn) else 0
    return attention + routed + mlp


def _activations(shape: ModelShape, layout: Layout) -> float:
    tokens = layout.micro_tokens / layout.context
    split = layout.tensor  # sequence parallel splits what tensor parallel does not
    layers = -(-shape.layers // layout.pipeline)
    per_layer = _layer_bytes_per_token(shape) * tokens / split
    if layout.recompute:
        return layers * 2 * shape.hidden * tokens / split + 2 * per_layer  # inputs + one layer, forward and back
    return layers * per_layer


def _logits(shape: ModelShape, layout: Layout) -> float:
    """bf16 logits, their fp32 log-softmax and its gradient; fused kernels work in chunks."""
    if layout.fused_logits:
        return 0.0
    tokens = layout.micro_tokens / layout.context
    return tokens * shape.vocab / layout.tensor * (2 + 4 + 4)


def _kv_bytes_per_token(shape: ModelShape, layout: Layout) -> float:
    heads = max(1, shape.kv_heads // layout.rollout_tensor)
    return shape.attention_layers * 2 * heads * shape.head_dim * 2


def find_config(path: str | None, spec_dir: Path) -> tuple[dict[str, Any], str] | None:
    """The model's config.json and where it came from: a local checkpoint, the local hub cache
    (no download), or the shipped public configs; None when none has it."""
    if not path:
        return None
    local = Path(path).expanduser()
    local = local if local.is_absolute() else spec_dir / local
    if (local / "config.json").is_file():
        return json.loads((local / "config.json").read_text()), str(local / "config.json")
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(path, "config.json")
    except Exception:  # noqa: BLE001 - not a hub id: nothing cached
        cached = None
    if isinstance(cached, str):
        return json.loads(Path(cached).read_text()), cached
    table = json.loads(REFERENCE_CONFIGS.read_text())
    if path in table:
        return table[path]["config"], f"lego-rl's copy of {path}'s public config ({table[path]['note']})"
    return None


def shape_of(config: dict[str, Any], source: str) -> ModelShape:
    """The shape of a config.json (its text model when it has one), parameters counted exactly."""
    return _shape(json.dumps(config, sort_keys=True), source)


@lru_cache(maxsize=8)
def _shape(config_json: str, source: str) -> ModelShape:
    import warnings

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging

    data = json.loads(config_json)
    model_type = data.pop("model_type")
    config = AutoConfig.for_model(model_type, **data)
    text = config.get_text_config()
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()  # building on meta says which fast kernels are missing
    try:
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            model = AutoModelForCausalLM.from_config(text)
    finally:
        logging.set_verbosity(verbosity)
    total = expert = embedding = 0
    for name, param in model.named_parameters():
        count = param.numel()
        total += count
        if _EXPERT.search(name):
            expert += count
        elif "embed_tokens" in name or name.startswith("lm_head"):
            embedding += count
    get = text.to_dict().get
    heads = int(get("num_attention_heads") or 1)
    layer_types = get("layer_types") or []
    return ModelShape(
        params=total,
        expert_params=expert,
        embedding_params=embedding,
        layers=int(get("num_hidden_layers")),
        hidden=int(get("hidden_size")),
        vocab=int(get("vocab_size")),
        experts=int(get("num_experts") or get("num_local_experts") or get("n_routed_experts") or 0),
        experts_per_token=int(get("num_experts_per_tok") or 0),
        expert_ffn=int(get("moe_intermediate_size") or 0),
        shared_ffn=int(get("shared_expert_intermediate_size") or 0),
        dense_ffn=int(get("intermediate_size") or 0) if not expert else 0,
        attention_layers=(
            sum(t != "linear_attention" for t in layer_types) if layer_types else int(get("num_hidden_layers"))
        ),
        heads=heads,
        kv_heads=int(get("num_key_value_heads") or heads),
        head_dim=int(get("head_dim") or int(get("hidden_size")) // heads),
        source=source,
    )
