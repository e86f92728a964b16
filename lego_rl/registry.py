"""The plugin registry: a typed facade over pluggy.

First-party plugins and third-party ones arrive the same way, through entry points in the
group ``lego_rl``. ``LEGORL_LOAD_PLUGINS`` (comma-separated entry-point names; empty for
none) restricts which are loaded. The rest of the code asks the registry for a component
(``registry.build("harness", "mini-swe-agent", options, ctx)``), never pluggy directly.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pluggy
from pydantic import BaseModel, ConfigDict, ValidationError

from lego_rl import hookspecs
from lego_rl.kinds import KINDS

if TYPE_CHECKING:
    from lego_rl.spec.models import Spec

GROUP = "lego_rl"
ENV_ALLOW = "LEGORL_LOAD_PLUGINS"


Benchmark = Callable[[list[str]], dict[str, Any]]
"""A benchmark's ``main``: the command's remaining arguments in, its figures out."""


class NoOptions(BaseModel):
    """Options model of a plugin that takes none."""

    model_config = ConfigDict(extra="forbid")


class RegistryError(Exception):
    """A plugin could not be registered or found."""


class UnknownPlugin(RegistryError):
    def __init__(self, kind: str, name: str, available: list[str]):
        self.kind, self.name, self.available = kind, name, available
        close = difflib.get_close_matches(name, available, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        names = ", ".join(available) if available else "none installed"
        super().__init__(f"unknown {kind} plugin {name!r} (available: {names}){hint}")


@dataclass(frozen=True)
class BuildContext:
    """What a factory may need beyond its own options."""

    spec: Spec | None = None
    run_dir: Path | None = None
    spec_dir: Path | None = None
    """Directory of the spec file: relative paths in options are resolved against it."""
    extra: dict[str, Any] = field(default_factory=dict)

    def path(self, value: str | Path) -> Path:
        """Resolve a path option relative to the spec file's directory."""
        p = Path(value).expanduser()
        return p if p.is_absolute() or self.spec_dir is None else (self.spec_dir / p).resolve()


@dataclass(frozen=True)
class PluginInfo:
    kind: str
    name: str
    factory: Callable[[Any, BuildContext], Any]
    options: type[BaseModel]
    distribution: str
    version: str
    doc: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "doc": self.doc,
        }


class Registry:
    """Every registered plugin, by kind and name."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(GROUP)
        self.pm.add_hookspecs(hookspecs)
        self._plugins: dict[str, dict[str, PluginInfo]] = {k: {} for k in KINDS}
        self._benchmarks: dict[str, tuple[Benchmark, str]] = {}
        self._tokenizers: dict[str, tuple[Callable[[], Any], str]] = {}
        self._attacks: dict[str, tuple[Any, str]] = {}
        self._tools: dict[str, tuple[dict[str, tuple[Any, str]], str]] = {
            "benchmark": (self._benchmarks, "legorl_register_benchmarks"),
            "tokenizer": (self._tokenizers, "legorl_register_tokenizers"),
            "attack": (self._attacks, "legorl_register_attacks"),
        }
        """What the tools hooks register, by what: (name -> (value, distribution), hook)."""
        self._dists: dict[int, tuple[str, str]] = {}

    # -------------------------------------------------------------- loading

    @classmethod
    def discover(cls) -> Registry:
        """A registry with every allowed entry-point plugin loaded."""
        registry = cls()
        registry.load_entry_points()
        return registry

    def load_entry_points(self) -> None:
        """Load every allowed entry point of the group; a broken one is a RegistryError.

        The error names the entry point, its module and its distribution, so the person can
        fix or uninstall that distribution, or leave it out with ``LEGORL_LOAD_PLUGINS``.
        """
        allow = _allow_list()
        for ep in importlib.metadata.entry_points(group=GROUP):
            if allow is not None and ep.name not in allow:
                continue
            if self.pm.get_plugin(ep.name) is not None:
                continue
            dist = ep.dist
            distribution = dist.metadata["Name"] if dist else ep.name
            version = dist.version if dist else ""
            where = (
                f"plugin entry point {ep.name!r} ({ep.value}) of distribution "
                f"{distribution} {version}".rstrip()
            )
            fix = (
                f"fix or uninstall {distribution}, or load only other plugins with "
                f"{ENV_ALLOW}=<comma-separated entry-point names>"
            )
            try:
                module = ep.load()
            except Exception as exc:
                raise RegistryError(
                    f"{where} failed to import: {type(exc).__name__}: {exc} ({fix})"
                ) from exc
            try:
                self.add_module(module, name=ep.name, distribution=distribution, version=version)
            except RegistryError:
                raise
            except Exception as exc:
                raise RegistryError(
                    f"{where} failed to register: {type(exc).__name__}: {exc} ({fix})"
                ) from exc
        self.pm.check_pending()

    def add_module(
        self,
        module: ModuleType | object,
        *,
        name: str | None = None,
        distribution: str = "(local)",
        version: str = "",
    ) -> None:
        """Register a plugin module (or object with hookimpls) and collect its components."""
        self.pm.register(module, name=name)
        self._dists[id(module)] = (distribution, version)
        self.pm.check_pending()
        for kind in KINDS:
            hook = getattr(self.pm.hook, f"legorl_register_{kind}")
            for impl in hook.get_hookimpls():
                if impl.plugin is module:
                    impl.function(register=self._register_for(kind, distribution, version))
        for what, (table, hook) in self._tools.items():
            named = self._register_tool(what, table, distribution)
            register = _by_own_name(named) if what == "attack" else named
            for impl in getattr(self.pm.hook, hook).get_hookimpls():
                if impl.plugin is module:
                    impl.function(register=register)

    def remove_module(self, module: object) -> None:
        """Unregister a module and everything it registered (for hermetic tests)."""
        dist = self._dists.pop(id(module), None)
        self.pm.unregister(module)
        if dist is None:
            return
        for by_name in self._plugins.values():
            for key in [k for k, p in by_name.items() if (p.distribution, p.version) == dist]:
                del by_name[key]
        for table, _ in self._tools.values():
            for key in [k for k, (_, d) in table.items() if d == dist[0]]:
                del table[key]

    def _register_tool(
        self, what: str, table: dict[str, tuple[Any, str]], distribution: str
    ) -> Callable[[str, Any], None]:
        def register(name: str, value: Any) -> None:
            if name in table:
                raise RegistryError(
                    f"{what} {name!r} registered twice: by {table[name][1]} and by {distribution}"
                )
            table[name] = (value, distribution)

        return register

    def _register_for(self, kind: str, distribution: str, version: str) -> Callable[..., None]:
        def register(
            name: str,
            factory: Callable[[Any, BuildContext], Any],
            options: type[BaseModel] = NoOptions,
        ) -> None:
            existing = self._plugins[kind].get(name)
            if existing is not None:
                raise RegistryError(
                    f"{kind} plugin {name!r} registered twice: by {existing.distribution} "
                    f"and by {distribution}"
                )
            if options.model_config.get("extra") != "forbid":
                raise RegistryError(
                    f"{kind} plugin {name!r} from {distribution}: its options model "
                    f"{options.__name__} must set model_config extra='forbid'"
                )
            doc = (factory.__doc__ or "").strip().splitlines()
            self._plugins[kind][name] = PluginInfo(
                kind, name, factory, options, distribution, version, doc[0] if doc else ""
            )

        return register

    # -------------------------------------------------------------- lookups

    def benchmarks(self) -> dict[str, Benchmark]:
        """Benchmark name -> its ``main(args) -> figures``, of every loaded plugin."""
        return {name: main for name, (main, _) in sorted(self._benchmarks.items())}

    def tokenizer(self, name: str) -> Any:
        """The tokenizer a plugin registered as ``name``, loaded (raises RegistryError)."""
        if name not in self._tokenizers:
            names = ", ".join(sorted(self._tokenizers)) or "none: pip install legorl-embedded"
            raise RegistryError(f"no plugin registers a tokenizer {name!r} (registered: {names})")
        return self._tokenizers[name][0]()

    def attacks(self) -> list[Any]:
        """The red-team attacks of every loaded plugin, in registration order."""
        return [attack for attack, _ in self._attacks.values()]

    def add_commands(self, cli: Any) -> None:
        """Let every loaded plugin add its commands to the ``legorl`` typer app."""
        self.pm.hook.legorl_register_commands(cli=cli)

    def names(self, kind: str) -> list[str]:
        return sorted(self._plugins[_check_kind(kind)])

    def all(self) -> list[PluginInfo]:
        return [p for kind in KINDS for _, p in sorted(self._plugins[kind].items())]

    def get(self, kind: str, name: str) -> PluginInfo:
        try:
            return self._plugins[_check_kind(kind)][name]
        except KeyError:
            raise UnknownPlugin(kind, name, self.names(kind)) from None

    def options(self, kind: str, name: str, raw: dict[str, Any] | BaseModel | None) -> BaseModel:
        """Validate raw options with the plugin's own model (raises ValidationError)."""
        model = self.get(kind, name).options
        if isinstance(raw, model):
            return raw
        if isinstance(raw, BaseModel):
            raw = raw.model_dump()
        return model.model_validate(raw or {})

    def build(
        self,
        kind: str,
        name: str,
        raw_options: dict[str, Any] | BaseModel | None = None,
        ctx: BuildContext | None = None,
    ) -> Any:
        info = self.get(kind, name)
        return info.factory(self.options(kind, name, raw_options), ctx or BuildContext())


def _by_own_name(register: Callable[[str, Any], None]) -> Callable[[Any], None]:
    """``register(value)`` under the value's own ``name`` (an attack)."""
    return lambda value: register(value.name, value)


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise RegistryError(f"unknown plugin kind {kind!r} (kinds: {', '.join(KINDS)})")
    return kind


def _allow_list() -> set[str] | None:
    raw = os.environ.get(ENV_ALLOW)
    if raw is None:
        return None
    return {n.strip() for n in raw.split(",") if n.strip()}


def options_errors(exc: ValidationError, prefix: Iterable[str | int]) -> list[tuple[str, str]]:
    """(spec path, message) for each error of a plugin options validation."""
    base = [str(p) for p in prefix]
    return [
        (".".join(base + [str(p) for p in err["loc"]]), err["msg"]) for err in exc.errors()
    ]


_default: Registry | None = None


def default_registry() -> Registry:
    """The process-wide registry of installed plugins (loaded on first use)."""
    global _default
    if _default is None:
        _default = Registry.discover()
    return _default
