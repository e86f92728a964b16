"""Build or load the embedded policy model, offline.

``ModelSpec.path`` pointing at a saved checkpoint loads it; without a path a tiny model of
``ModelSpec.architecture`` (``qwen3-moe`` or dense ``qwen3``) is built from defaults below,
overridden field by field by ``ModelSpec.config``. Models are built in float32; inference
and training cast as they need.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForCausalLM,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

from lego_rl.spec.models import ModelSpec
from legorl_embedded.policy.tokenizer import vocab_size

TINY_COMMON: dict[str, Any] = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "tie_word_embeddings": True,
}
"""Defaults shared by every tiny architecture."""

ARCHITECTURES: dict[str, tuple[type[PretrainedConfig], type[PreTrainedModel], dict[str, Any]]] = {
    "qwen3-moe": (
        Qwen3MoeConfig,
        Qwen3MoeForCausalLM,
        {
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 64,
            "intermediate_size": 128,
            "norm_topk_prob": True,
            "experts_implementation": "eager",  # fastest on CPU for a few tiny experts
        },
    ),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM, {"intermediate_size": 128}),
}
"""architecture name -> (config class, model class, tiny defaults beyond TINY_COMMON)."""


def build_model(model: ModelSpec, tokenizer: PreTrainedTokenizerBase, seed: int = 0) -> PreTrainedModel:
    """The policy: loaded from ``model.path`` if set, else a tiny model built from config."""
    if model.path:
        return _load_checkpoint(model.path, tokenizer)
    return build_from_config(model, tokenizer, seed)


def build_from_config(model: ModelSpec, tokenizer: PreTrainedTokenizerBase, seed: int = 0) -> PreTrainedModel:
    """A freshly initialised model of ``model.architecture``; the same seed gives the same weights."""
    if model.architecture not in ARCHITECTURES:
        raise ValueError(
            f"model.architecture {model.architecture!r} cannot be built from config "
            f"(buildable: {', '.join(ARCHITECTURES)}); set model.path to a checkpoint instead"
        )
    config_cls, model_cls, defaults = ARCHITECTURES[model.architecture]
    fields: dict[str, Any] = {
        **TINY_COMMON,
        **defaults,
        "vocab_size": vocab_size(tokenizer),
        "max_position_embeddings": model.max_context,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": None,
        **model.config,
    }
    if fields["vocab_size"] < vocab_size(tokenizer):
        raise ValueError(
            f"model.config.vocab_size {fields['vocab_size']} is smaller than the tokenizer "
            f"({vocab_size(tokenizer)} tokens); remove it or raise it"
        )
    config = config_cls(**fields)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        built = model_cls(config)
    return built.eval()


def _load_checkpoint(path: str, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
    local = Path(path).expanduser()
    if not (local / "config.json").is_file():
        raise FileNotFoundError(
            f"model.path {path!r} is not a local checkpoint directory (no config.json); "
            "point it at a directory written by save_checkpoint/save_pretrained, "
            "or remove it to build a model from model.config"
        )
    loaded = AutoModelForCausalLM.from_pretrained(str(local), dtype=torch.float32, local_files_only=True)
    vocab = loaded.get_output_embeddings().weight.shape[0]
    if vocab < vocab_size(tokenizer):
        raise ValueError(
            f"checkpoint {path!r} has {vocab} output ids but the tokenizer has {vocab_size(tokenizer)}; "
            "use the tokenizer the checkpoint was trained with (model.tokenizer)"
        )
    return loaded.eval()


def save_checkpoint(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, path: str | Path) -> Path:
    """Write weights, config and tokenizer (with its chat template) so build_model can load them."""
    target = Path(path)
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    return target

