"""Whether a resolved spec can start: missing plugins and each component's preflight.

Shared by ``plan`` (which reports it) and ``apply`` (which refuses to start unless ready).
Building a component is cheap by contract, so every installed block is built here and its
``preflight()`` called when it has one.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lego_rl.kinds import NeedsInference, OwnsRollout, Preflights, Problem
from lego_rl.registry import BuildContext, Registry
from lego_rl.spec.resolve import Resolved, ResolvedBlock

_GPU = re.compile(r"\b(GPUs?|CUDA)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Finding:
    """One preflight problem of one block."""

    path: str
    plugin: str
    message: str
    fix: str = ""
    fatal: bool = True

    @property
    def needs_gpu(self) -> bool:
        """The component says it needs a GPU (its message or fix mentions GPU or CUDA)."""
        return bool(_GPU.search(f"{self.message} {self.fix}"))

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "needs_gpu": self.needs_gpu}


@dataclass
class Readiness:
    resolved: Resolved
    findings: list[Finding] = field(default_factory=list)

    @property
    def missing(self) -> list[ResolvedBlock]:
        return self.resolved.missing

    @property
    def fatal(self) -> list[Finding]:
        return [f for f in self.findings if f.fatal]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if not f.fatal]

    @property
    def ready(self) -> bool:
        return not self.missing and not self.fatal

    @property
    def needs_gpu(self) -> list[str]:
        """Block paths whose component says it needs a GPU."""
        return sorted({f.path for f in self.findings if f.needs_gpu})


def check(resolved: Resolved, registry: Registry, spec_path: Path) -> Readiness:
    """Build every installed component and collect its preflight problems."""
    spec = resolved.spec
    ctx = BuildContext(
        spec=spec, run_dir=spec.run.run_dir.resolve(), spec_dir=spec_path.resolve().parent
    )
    readiness = Readiness(resolved)
    built: dict[str, Any] = {}
    owner = _rollout_owner(resolved, registry, ctx, built)
    for block in resolved.blocks:
        if block.info is None:
            continue
        if owner is not None and block.kind == "inference":
            readiness.findings.append(_owned(block, owner))
        else:
            readiness.findings.extend(_preflight(block, registry, ctx, built))
    readiness.findings.extend(_inference_needs(resolved, built))
    return readiness


def _inference_needs(resolved: Resolved, built: dict[str, Any]) -> list[Finding]:
    """The capabilities the trainer needs of the inference component (:class:`NeedsInference`)
    that it lacks, each a fatal finding of the inference block."""
    blocks = {b.kind: b for b in resolved.blocks if b.kind in ("trainer", "inference")}
    trainer = built.get(blocks["trainer"].path) if "trainer" in blocks else None
    inference = built.get(blocks["inference"].path) if "inference" in blocks else None
    if not isinstance(trainer, NeedsInference) or inference is None:
        return []
    block, owner = blocks["inference"], blocks["trainer"].block.plugin
    return [
        Finding(
            block.path,
            block.block.plugin,
            f"trainer {owner!r} needs an inference backend that offers {need.__name__} "
            f"({(need.__doc__ or '').strip().splitlines()[0].rstrip('.')}); inference "
            f"{block.block.plugin!r} does not",
            f"choose an inference plugin that offers {need.__name__}, or another trainer",
        )
        for need in trainer.inference_needs
        if not isinstance(inference, need)
    ]


def _rollout_owner(
    resolved: Resolved, registry: Registry, ctx: BuildContext, built: dict[str, Any]
) -> str | None:
    """The trainer's name when it runs its own rollout servers (as ``apply`` sees it: then no
    inference block is built, so none is checked); None otherwise or when it cannot be built
    (its preflight then reports why). The trainer built here goes into ``built``."""
    block = next((b for b in resolved.blocks if b.kind == "trainer"), None)
    if block is None or block.info is None:
        return None
    try:
        trainer = registry.build(block.kind, block.block.plugin, block.options, ctx)
    except Exception:  # reported by the trainer's own preflight
        return None
    built[block.path] = trainer
    return block.block.plugin if isinstance(trainer, OwnsRollout) else None


def _owned(block: ResolvedBlock, owner: str) -> Finding:
    return Finding(
        block.path,
        block.block.plugin,
        f"inference {block.block.plugin!r} is served by the rollout of trainer {owner!r}, in the "
        "trainer's environment: lego-rl launches no server for it and does not check it",
        fix=f"trainer {owner}'s findings name that environment",
        fatal=False,
    )


def _preflight(
    block: ResolvedBlock, registry: Registry, ctx: BuildContext, built: dict[str, Any]
) -> list[Finding]:
    """The component's preflight problems; the component built here goes into ``built``."""
    name = block.block.plugin
    component = built.get(block.path)
    if component is None:
        try:
            component = built[block.path] = registry.build(block.kind, name, block.options, ctx)
        except Exception as exc:
            return [_crash(block, "could not be built", exc)]
    if not isinstance(component, Preflights):
        return []
    try:
        problems: list[Problem] = list(component.preflight())
    except Exception as exc:
        return [_crash(block, "preflight() raised", exc)]
    return [Finding(block.path, name, p.message, p.fix, p.fatal) for p in problems]


def _crash(block: ResolvedBlock, what: str, exc: Exception) -> Finding:
    dist = block.info.distribution if block.info else "?"
    return Finding(
        block.path,
        block.block.plugin,
        f"{block.kind} plugin {block.block.plugin!r} {what}: {type(exc).__name__}: {exc}",
        f"check {block.path}.options; if they are right, report it to {dist}",
    )
