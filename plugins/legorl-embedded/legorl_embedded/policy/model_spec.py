"""The spec's ``model`` block as the embedded plugins read it (no torch import here)."""

from __future__ import annotations

from lego_rl.registry import BuildContext
from lego_rl.spec.models import ModelSpec

TEMPLATE_NAMES = ("qwen3", "native")
"""Chat templates known by name; anything else is a path to a Jinja file."""


def resolve_model_paths(model: ModelSpec, ctx: BuildContext) -> ModelSpec:
    """model.path / tokenizer / chat_template given as paths, made relative to the spec file."""
    update: dict[str, str] = {}
    if model.path:
        update["path"] = str(ctx.path(model.path))
    if model.tokenizer != "qwen3":
        update["tokenizer"] = str(ctx.path(model.tokenizer))
    if model.chat_template not in TEMPLATE_NAMES:
        update["chat_template"] = str(ctx.path(model.chat_template))
    return model.model_copy(update=update)
