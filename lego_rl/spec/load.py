"""Load a spec: YAML file, then ``LEGORL_*`` environment overrides, then dotted CLI overrides.

``LEGORL_RUN__STEPS=3`` and ``run.steps=3`` both set ``run.steps``; values are parsed as
YAML scalars (``3`` is an int, ``true`` a bool, ``[a, b]`` a list).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError, create_model
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from lego_rl.spec.models import RENAMED_BLOCKS, Spec, current_names


class SpecError(Exception):
    """A spec that cannot be used; ``errors`` holds (spec path, message) pairs."""

    def __init__(self, source: str, errors: list[tuple[str, str]]):
        self.source, self.errors = source, errors
        lines = "\n".join(f"  {path or '(root)'}: {msg}" for path, msg in errors)
        super().__init__(f"{source}: {len(errors)} error(s)\n{lines}")


ENV_PREFIX = "LEGORL_"


class _SpecEnv(BaseSettings):
    """The ``LEGORL_*`` variables that address the spec, read by pydantic-settings.

    One loosely typed field per top-level spec field: values are validated later, with the
    rest of the spec, so an error names the spec path rather than the variable.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", case_sensitive=False, extra="ignore"
    )


_SPEC_ENV_FIELDS: dict[str, Any] = {  # (type, default) per field: a type as a value is no TypeForm to mypy
    name: (dict[str, Any] | None, None)
    for name in [*Spec.model_fields, *RENAMED_BLOCKS]  # an earlier name, mapped by apply_override
    if name != "version"
}
_SPEC_ENV = create_model("SpecEnv", __base__=_SpecEnv, **_SPEC_ENV_FIELDS)


def env_overrides(environ: Mapping[str, str] | None = None) -> list[str]:
    """``LEGORL_*`` variables that address the spec, as dotted overrides.

    ``LEGORL_RUN__STEPS=3`` becomes ``run.steps=3``, ``LEGORL_ANTICHEAT__0__PLUGIN=x``
    becomes ``anticheat.0.plugin=x`` and ``LEGORL_RUN='{"steps": 3}'`` (JSON) ``run.steps=3``.
    Variables whose first segment is not a spec field (``LEGORL_LOAD_PLUGINS``, plugins' own
    settings) are left alone.
    """
    environ = os.environ if environ is None else environ
    source = EnvSettingsSource(_SPEC_ENV)
    source.env_vars = {k.lower(): v for k, v in environ.items() if k.upper().startswith(ENV_PREFIX)}
    return sorted(_dotted(source()))


def _dotted(tree: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.extend(_dotted(value, path + "."))
        else:
            out.append(f"{path}={value if isinstance(value, str) else json.dumps(value)}")
    return out


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged onto a copy of ``base``: nested dicts key by key, anything else replaced
    (neither argument changes)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def apply_override(data: dict[str, Any], dotted: str) -> None:
    """Apply one ``a.b.c=value`` override in place.

    List items are addressed by index (``anticheat.0.plugin=x``); the index one past the end
    appends a new item. The value is parsed as YAML (``3`` is an int, ``[a, b]`` a list). A
    block's earlier name (``observe``) addresses it under its current one.
    """
    key, eq, raw = dotted.partition("=")
    key = key.strip()
    parts = key.split(".")
    if not eq or not all(parts):
        raise SpecError("override", [(dotted, "expected KEY=VALUE, e.g. run.steps=3")])
    parts[0] = RENAMED_BLOCKS.get(parts[0], parts[0])
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise SpecError("override", [(key, f"value is not valid YAML: {exc}")]) from None
    node: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        fresh: Any = value if last else ([] if parts[i + 1].isdigit() else {})
        if isinstance(node, list):
            idx = _index(part, node, ".".join(parts[: i + 1]))
            if idx == len(node):
                node.append(fresh)
            elif last:
                node[idx] = value
            node = node[idx]
        elif isinstance(node, dict):
            if last or node.get(part) is None:
                node[part] = fresh
            node = node[part]
        else:
            where = ".".join(parts[:i])
            raise SpecError("override", [(key, f"{where} is {node!r}, not a mapping or list")])


def _index(part: str, node: list[Any], where: str) -> int:
    if not part.isdigit() or int(part) > len(node):
        n = len(node)
        message = f"list index {part!r} out of range ({n} items; index {n} appends)"
        raise SpecError("override", [(where, message)])
    return int(part)


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise SpecError(str(path), [("", "file not found")]) from None
    except yaml.YAMLError as exc:
        raise SpecError(str(path), [("", f"invalid YAML: {exc}")]) from None
    if not isinstance(data, dict):
        raise SpecError(str(path), [("", "a spec must be a YAML mapping")])
    return data


def raw_spec(path: Path, overrides: Sequence[str] = (), use_env: bool = True) -> dict[str, Any]:
    """The merged spec data before validation, its blocks under their current names (an
    override may name a block by either)."""
    try:
        data = current_names(read_yaml(path))
    except ValueError as exc:
        raise SpecError(str(path), [("", str(exc))]) from None
    for item in [*(env_overrides() if use_env else []), *overrides]:
        apply_override(data, item)
    return data


def validation_errors(exc: ValidationError) -> list[tuple[str, str]]:
    return [(".".join(str(p) for p in e["loc"]), e["msg"]) for e in exc.errors()]


def load_spec(path: Path | str, overrides: Sequence[str] = (), use_env: bool = True) -> Spec:
    """Load and structurally validate a spec (plugin options are checked by resolve)."""
    path = Path(path)
    data = raw_spec(path, overrides, use_env)
    try:
        return Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(str(path), validation_errors(exc)) from None
