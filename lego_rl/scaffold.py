"""Generate a plugin distribution from the template in ``contrib/plugin-template``
(``legorl new-plugin KIND NAME``): a package whose tests run lego-rl's contracts for its kind."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lego_rl import __version__
from lego_rl.kinds import KINDS
from lego_rl.spec.models import BLOCK_KINDS, LIST_BLOCKS

TEMPLATE = Path(__file__).resolve().parent / "plugin_template"
"""The template directory (a link to ``contrib/plugin-template`` in a checkout, a copy in a wheel)."""
NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
PACKAGE_DIR = "__package__"
"""The template's package directory, renamed to the plugin's import package."""

EXAMPLE_SPEC: dict[str, Any] = {
    "version": 1,
    "model": {
        "name": "tiny-qwen3-moe",
        "config": {"hidden_size": 64, "num_hidden_layers": 2, "num_experts": 4, "num_experts_per_tok": 2},
    },
    "run": {"steps": 1},
    "tasks": {"plugin": "harbor-dir", "options": {"path": "tasks"}},
    "sandbox": {"plugin": "local"},
    "harness": {"plugin": "mini-swe-agent"},
    "dialect": {"plugin": "openai-chat"},
    "verifier": {"plugin": "test-script"},
    "anticheat": [],
    "filter": {"plugin": "none"},
    "optimizer": {"plugin": "grpo"},
    "inference": {"plugin": "hf"},
    "trainer": {"plugin": "embedded"},
    "observer": [{"plugin": "store"}],
}
"""The example spec around the new plugin: first-party plugins (legorl-std, legorl-embedded,
legorl-mini-swe-agent) in the other blocks."""
EXAMPLE_OPTIONS: dict[str, dict[str, Any]] = {"tasks": {"path": "tasks"}}
"""Options a template's plugin needs in the example spec (its required fields)."""


class ScaffoldError(ValueError):
    """The plugin cannot be generated as asked."""


@dataclass(frozen=True)
class PluginNames:
    """Every name derived from the plugin's kind and spec name."""

    kind: str
    name: str

    @property
    def dist(self) -> str:
        return f"legorl-{self.name}"

    @property
    def package(self) -> str:
        return self.dist.replace("-", "_")

    @property
    def cls(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("-"))

    @property
    def block(self) -> str:
        return next(field for field, kind in BLOCK_KINDS.items() if kind == self.kind)

    def substitutions(self) -> dict[str, str]:
        return {
            "{{name}}": self.name,
            "{{kind}}": self.kind,
            "{{dist}}": self.dist,
            "{{package}}": self.package,
            "{{Class}}": self.cls,
            "{{block}}": self.block,
            "{{lego_rl}}": __version__,
        }


def plugin_names(kind: str, name: str) -> PluginNames:
    """The names, or a ScaffoldError saying what a valid kind or name is."""
    if kind not in KINDS:
        raise ScaffoldError(f"unknown plugin kind {kind!r}; kinds: {', '.join(KINDS)}")
    if not NAME.match(name):
        raise ScaffoldError(
            f"plugin name {name!r}: use lower-case letters, digits and single hyphens, starting with a letter (e.g. my-agent)"
        )
    return PluginNames(kind, name)


def new_plugin(kind: str, name: str, parent: Path) -> Path:
    """Write the distribution ``legorl-NAME`` under ``parent``; return its directory."""
    names = plugin_names(kind, name)
    target = parent / names.dist
    if target.exists() and any(target.iterdir()):
        raise ScaffoldError(f"{target} already exists and is not empty; choose another --dir or name")
    if not (TEMPLATE / "kinds" / f"{kind}.py").is_file():
        raise ScaffoldError(f"the plugin template is missing at {TEMPLATE}; reinstall lego-rl")
    subs = names.substitutions()
    for src in sorted((TEMPLATE / "package").rglob("*")):
        if src.is_file() and "__pycache__" not in src.parts:
            relative = src.relative_to(TEMPLATE / "package").as_posix().replace(PACKAGE_DIR, names.package)
            _write(target / relative, _render(src.read_text(), subs))
    _write(target / names.package / "plugin.py", _render((TEMPLATE / "kinds" / f"{kind}.py").read_text(), subs))
    _write(target / "examples" / "spec.yaml", example_spec(names))
    return target


def example_spec(names: PluginNames) -> str:
    """The example spec, with the new plugin in its kind's block."""
    spec: dict[str, Any] = {key: (list(value) if isinstance(value, list) else value) for key, value in EXAMPLE_SPEC.items()}
    entry: dict[str, Any] = {"plugin": names.name}
    if names.kind in EXAMPLE_OPTIONS:
        entry["options"] = EXAMPLE_OPTIONS[names.kind]
    spec["run"] = {"name": f"{names.name}-example", **spec["run"]}
    spec[names.block] = [*spec[names.block], entry] if names.block in LIST_BLOCKS else entry
    header = (
        f"# An example spec with {names.name} as its {names.kind} plugin; the other blocks name\n"
        "# first-party plugins. tests/test_example_spec.py validates it against the schema of\n"
        "# the installed plugins (`legorl schema --installed`) with jsonschema alone.\n"
    )
    return header + yaml.safe_dump(spec, sort_keys=False)


def _render(text: str, subs: dict[str, str]) -> str:
    for placeholder, value in subs.items():
        text = text.replace(placeholder, value)
    return text


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
