"""Which environment trainer ``verl`` needs: the ``train`` lock of the lego-rl repository.

verl's rollout workers import the vLLM they serve with (``inference: vllm`` under this trainer
is verl's own vLLM, not a ``vllm serve`` that lego-rl launches), so verl, that vLLM, the
engine and the trials all live in one environment on every GPU node:
``gpu/requirements-train.txt``, resolved from verl 0.9.1's own ``vllm`` extra. vLLM 0.33 (the
``vllm`` lock) cannot join it: it needs transformers >= 5.16.1, verl 0.9.1 < 5.11.
"""

from __future__ import annotations

import importlib.util
from importlib import metadata
from typing import Any

from lego_rl.kinds import Problem

LOCK = "gpu/requirements-train.txt"
PINS = {
    "verl": "0.9.1",
    "vllm": "0.24.0",
    "torch": "2.11.0",
    "transformers": "5.9.0",
    "ray": "2.60.0",
    "transferqueue": "0.1.11",
    "megatron-core": "0.19.2",
    "mbridge": "0.15.1",
}
"""The lock's pins that make the environment (tests/test_gpu_locks.py keeps them equal)."""
INSTALL = (
    "python3.12 -m venv .venv-train && .venv-train/bin/pip install -r gpu/requirements-train.txt "
    "-e . -e plugins/legorl-std -e plugins/legorl-embedded -e plugins/legorl-verl -e plugins/legorl-vllm "
    "-e plugins/legorl-claude-code -e plugins/legorl-codex -e plugins/legorl-openhands "
    "-e plugins/legorl-mini-swe-agent -e plugins/legorl-swe-bench"
)
"""The lock's install line, from the root of a lego-rl checkout."""
CUDA_BUILDS = {
    "fsdp": ("flash_attn", "pip install --no-build-isolation flash-attn==2.8.3"),
    "megatron": ("transformer_engine", "pip install --no-build-isolation 'transformer-engine[core_cu13,pytorch]'"),
}
"""strategy -> (module, install step): what the engine imports that only a CUDA build gives."""
VANILLA_MBRIDGE = "actor_rollout_ref.actor.megatron.vanilla_mbridge"
"""verl's switch from Megatron-Bridge (its default) to mbridge, the bridge the lock holds."""


def differences() -> list[str]:
    """How this environment differs from the lock's pins (empty: it is the training environment)."""
    found = []
    for name, pinned in PINS.items():
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            found.append(f"no {name} (pinned {pinned})")
            continue
        if version != pinned:
            found.append(f"{name} {version} (pinned {pinned})")
    return found


def problems(strategy: str, overrides: dict[str, Any] | None = None) -> list[Problem]:
    """Non-fatal: the trainer usually runs where this plan is made only after these steps."""
    found = []
    if diffs := differences():
        found.append(
            Problem(
                f"trainer verl and the vLLM rollout it drives (inference vllm) need the training "
                f"environment {LOCK} on every GPU node; this one differs: {', '.join(diffs)}",
                fix=f"from the lego-rl checkout: `{INSTALL}`, then run legorl from .venv-train",
                fatal=False,
            )
        )
    module, step = CUDA_BUILDS[strategy]
    if not _has(module):
        found.append(
            Problem(
                f"strategy {strategy} imports {module}, a CUDA build outside {LOCK}",
                fix=f"on the GPU node, in the training environment: `{step}`",
                fatal=False,
            )
        )
    if strategy == "megatron" and not (overrides or {}).get(VANILLA_MBRIDGE) and not _has("megatron.bridge"):
        found.append(
            Problem(
                "strategy megatron: verl 0.9.1 builds the model through Megatron-Bridge by default, which "
                f"is not in {LOCK} (megatron-bridge pins flashinfer-python 0.6.8.post1, the vLLM 0.24.0 "
                "there 0.6.12; verl's own pin, 0.5.2, is not on PyPI)",
                fix=f"use verl's mbridge path, which the lock holds: trainer.options.overrides "
                f"{{{VANILLA_MBRIDGE}: true}}",
                fatal=False,
            )
        )
    return found


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False
