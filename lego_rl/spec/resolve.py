"""Resolve a spec against the registry: every block to a plugin and validated options.

A plugin name that no installed distribution registers is an error, unless it is a
first-party plugin of this project that is simply not installed here (see
:mod:`lego_rl.catalog`): then it is reported as *missing*, with how to get it, so a spec
for a GPU cluster still validates on a laptop while ``apply`` refuses to start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from lego_rl.catalog import planned
from lego_rl.kinds import SpeaksDialect
from lego_rl.registry import PluginInfo, Registry, UnknownPlugin, options_errors
from lego_rl.spec.load import SpecError, raw_spec, validation_errors
from lego_rl.spec.models import BLOCK_KINDS, LIST_BLOCKS, Block, Spec, current_names


@dataclass
class ResolvedBlock:
    path: str
    kind: str
    block: Block
    info: PluginInfo | None = None
    options: BaseModel | None = None
    missing: str = ""
    """Why this first-party plugin is not available here, and how to get it."""


@dataclass
class Resolved:
    spec: Spec
    blocks: list[ResolvedBlock] = field(default_factory=list)

    @property
    def missing(self) -> list[ResolvedBlock]:
        return [b for b in self.blocks if b.missing]

    def block(self, path: str) -> ResolvedBlock:
        return next(b for b in self.blocks if b.path == path)

    def options(self, path: str) -> BaseModel:
        opts = self.block(path).options
        if opts is None:
            raise KeyError(f"{path}: plugin not available")
        return opts


def resolve(spec: Spec, registry: Registry, source: str = "spec") -> Resolved:
    """Check every block; raise SpecError with every problem at once."""
    errors: list[tuple[str, str]] = []
    out = Resolved(spec)
    for path, kind, block in spec.blocks():
        rb, block_errors = resolve_block(path, kind, block, registry)
        out.blocks.append(rb)
        errors.extend(block_errors)
    errors.extend(_cross_checks(out, registry))
    if errors:
        raise SpecError(source, errors)
    return out


def resolve_block(
    path: str, kind: str, block: Block, registry: Registry
) -> tuple[ResolvedBlock, list[tuple[str, str]]]:
    """One block to its plugin and validated options, with the errors found."""
    rb = ResolvedBlock(path, kind, block)
    try:
        rb.info = registry.get(kind, block.plugin)
    except UnknownPlugin as exc:
        rb.missing = planned(kind, block.plugin)
        return rb, [] if rb.missing else [(f"{path}.plugin", str(exc))]
    try:
        rb.options = registry.options(kind, block.plugin, block.options)
    except ValidationError as exc:
        return rb, options_errors(exc, [path, "options"])
    return rb, []


def load_and_resolve(
    path: Path | str, registry: Registry, overrides: Sequence[str] = (), use_env: bool = True
) -> Resolved:
    """Load a spec file and resolve it, reporting structural and options errors together."""
    path = Path(path)
    data = raw_spec(path, overrides, use_env)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        errors = validation_errors(exc)
        for block_path, kind, block in _parsable_blocks(data):
            errors.extend(resolve_block(block_path, kind, block, registry)[1])
        raise SpecError(str(path), _unique(errors)) from None
    return resolve(spec, registry, source=str(path))


def _parsable_blocks(data: dict[str, Any]) -> list[tuple[str, str, Block]]:
    """The plugin blocks of unvalidated spec data that are well-formed on their own."""
    out: list[tuple[str, str, Block]] = []
    try:
        data = current_names(data)
    except ValueError:
        pass  # reported by the validation
    for name, kind in BLOCK_KINDS.items():
        value = data.get(name)
        items = (
            [(f"{name}.{i}", v) for i, v in enumerate(value)]
            if name in LIST_BLOCKS and isinstance(value, list)
            else [(name, value)]
        )
        for block_path, raw in items:
            try:
                out.append((block_path, kind, Block.model_validate(raw)))
            except ValidationError:
                continue
    return out


def _unique(errors: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return list(dict.fromkeys(errors))


def _cross_checks(resolved: Resolved, registry: Registry) -> list[tuple[str, str]]:
    """Constraints between blocks that no single options model can see."""
    errors: list[tuple[str, str]] = []
    harness = resolved.block("harness")
    dialect = resolved.block("dialect")
    if harness.info is not None and harness.options is not None:
        factory = harness.info.factory
        spoken = factory.dialect if isinstance(factory, SpeaksDialect) else None
        if spoken and spoken != dialect.block.plugin:
            errors.append(
                (
                    "dialect.plugin",
                    f"harness {harness.block.plugin!r} speaks {spoken!r}, "
                    f"not {dialect.block.plugin!r}",
                )
            )
    return errors
