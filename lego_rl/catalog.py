"""First-party plugins, and the distribution that provides each.

A spec may name one of these where it is not installed; ``validate`` accepts it with a
warning, ``plan`` and ``apply`` say what is missing and how to get it, and ``apply`` refuses
to start. Anything not listed here and not installed is simply an unknown plugin.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

from lego_rl.registry import ENV_ALLOW, GROUP

CATALOG: dict[tuple[str, str], str] = {
    # legorl-std: the light, embedded set
    ("tasks", "harbor-dir"): "legorl-std",
    ("sandbox", "local"): "legorl-std",
    ("dialect", "openai-chat"): "legorl-std",
    ("dialect", "anthropic-messages"): "legorl-std",
    ("dialect", "openai-responses"): "legorl-std",
    ("verifier", "test-script"): "legorl-std",
    ("harness", "scripted"): "legorl-std",
    ("anticheat", "no-network"): "legorl-std",
    ("anticheat", "git-history"): "legorl-std",
    ("anticheat", "test-guard"): "legorl-std",
    ("anticheat", "reward-guard"): "legorl-std",
    ("anticheat", "process-reaper"): "legorl-std",
    ("anticheat", "reward-hacking"): "legorl-std",
    ("filter", "none"): "legorl-std",
    ("filter", "pass-rate"): "legorl-std",
    ("filter", "group-variance"): "legorl-std",
    ("tasks", "bugfix"): "legorl-std",
    ("observer", "store"): "legorl-std",
    # legorl-embedded: transformers inference, objectives, the torch trainer
    ("inference", "hf"): "legorl-embedded",
    ("optimizer", "grpo"): "legorl-embedded",
    ("optimizer", "gspo"): "legorl-embedded",
    ("optimizer", "ppo"): "legorl-embedded",
    ("trainer", "embedded"): "legorl-embedded",
    # one distribution per harness
    ("harness", "mini-swe-agent"): "legorl-mini-swe-agent",
    ("harness", "claude-code"): "legorl-claude-code",
    ("harness", "codex"): "legorl-codex",
    ("harness", "openhands"): "legorl-openhands",
    # heavier backends
    ("sandbox", "harbor"): "legorl-harbor",
    ("tasks", "swe-bench"): "legorl-swe-bench",
    ("verifier", "swe-bench"): "legorl-swe-bench",
    ("inference", "vllm"): "legorl-vllm",
    ("trainer", "verl"): "legorl-verl",
    ("observer", "wandb"): "legorl-wandb",
    ("observer", "tensorboard"): "legorl-tensorboard",
}
"""(kind, name) -> the first-party distribution that provides it."""

FIRST_PARTY = frozenset(CATALOG.values())
"""Every first-party distribution, shipped or planned."""

NEEDS_GPU = frozenset({"legorl-vllm", "legorl-verl"})
"""Distributions whose plugins only run on a machine with a GPU."""

PLUGINS_DIR = Path(__file__).resolve().parents[1] / "plugins"
"""Where first-party distributions live in a source checkout."""


def is_first_party(distribution: str) -> bool:
    """Whether a distribution is this project's: lego-rl itself or one in the catalogue.

    Not a name prefix: third parties publish ``legorl-*`` distributions too (it is what
    ``legorl new-plugin`` generates), and their plugins stay out of the committed schema.
    """
    name = distribution.lower().replace("_", "-")
    return name == "lego-rl" or name in FIRST_PARTY


def planned(kind: str, name: str) -> str:
    """How to get a first-party plugin that is not installed, or '' if it is not ours."""
    dist = CATALOG.get((kind, name))
    if dist is None:
        return ""
    gpu = " (needs a GPU)" if dist in NEEDS_GPU else ""
    what = f"{kind} plugin {name!r}"
    if _installed_version(dist):
        if _excluded(dist):
            return (
                f"{what} comes with {dist}, which is installed but left out by "
                f"LEGORL_LOAD_PLUGINS (add its entry point to that list){gpu}"
            )
        return f"{what} is planned in {dist}, but the installed {dist} does not provide it yet{gpu}"
    source = PLUGINS_DIR / dist
    if (source / "pyproject.toml").is_file():
        return (
            f"{what} comes with {dist}, which is not installed "
            f"(pip install -e {_shown(source)}){gpu}"
        )
    return f"{what} comes with {dist}, which is not in this checkout yet (planned){gpu}"


def _excluded(dist: str) -> bool:
    """Whether LEGORL_LOAD_PLUGINS leaves out an entry point of an installed distribution."""
    raw = os.environ.get(ENV_ALLOW)
    if raw is None:
        return False
    allow = {n.strip() for n in raw.split(",")}
    eps = importlib.metadata.distribution(dist).entry_points
    return any(ep.name not in allow for ep in eps if ep.group == GROUP)


def _installed_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _shown(path: Path) -> str:
    """A path relative to the working directory when it lies below it."""
    try:
        return os.path.relpath(path) if path.is_relative_to(Path.cwd()) else str(path)
    except ValueError:
        return str(path)
