"""The plugin registry: registration rules, lookups, entry-point loading (hermetic)."""

from __future__ import annotations

import importlib.metadata
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from lego_rl import hookimpl
from lego_rl.registry import GROUP, BuildContext, Registry, RegistryError, UnknownPlugin


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int = 1


class Loose(BaseModel):
    size: int = 1


def make(options: Options, ctx: BuildContext) -> tuple[Options, BuildContext]:
    """Echo what the factory was given."""
    return options, ctx


def plugin_module(name: str, harness: str, options: type[BaseModel] = Options) -> types.ModuleType:
    """A plugin module that registers one harness."""
    module = types.ModuleType(name)

    @hookimpl
    def legorl_register_harness(register: Any) -> None:
        register(harness, make, options=options)

    module.legorl_register_harness = legorl_register_harness  # type: ignore[attr-defined]
    return module


def test_register_get_and_build() -> None:
    reg = Registry()
    reg.add_module(plugin_module("m", "agent"), distribution="legorl-x", version="1.0")
    info = reg.get("harness", "agent")
    assert (info.distribution, info.version, info.doc) == (
        "legorl-x",
        "1.0",
        "Echo what the factory was given.",
    )
    options, ctx = reg.build("harness", "agent", {"size": 3}, BuildContext(spec_dir=Path("/s")))
    assert options == Options(size=3)
    assert ctx.path("tasks") == Path("/s/tasks") and ctx.path("/abs") == Path("/abs")


def test_duplicate_registration_is_an_error() -> None:
    reg = Registry()
    reg.add_module(plugin_module("a", "agent"), distribution="dist-a")
    with pytest.raises(
        RegistryError, match="harness plugin 'agent' registered twice: by dist-a and by dist-b"
    ):
        reg.add_module(plugin_module("b", "agent"), distribution="dist-b")


def test_options_model_must_forbid_extra() -> None:
    reg = Registry()
    with pytest.raises(
        RegistryError, match="options model Loose must set model_config extra='forbid'"
    ):
        reg.add_module(plugin_module("m", "agent", Loose), distribution="dist-a")


def test_unknown_plugin_suggests_close_match() -> None:
    reg = Registry()
    reg.add_module(plugin_module("m", "mini-swe-agent"))
    with pytest.raises(UnknownPlugin) as info:
        reg.get("harness", "mini-swe-agnet")
    assert str(info.value) == (
        "unknown harness plugin 'mini-swe-agnet' (available: mini-swe-agent); "
        "did you mean 'mini-swe-agent'?"
    )


def test_remove_module_unregisters_its_plugins() -> None:
    reg = Registry()
    module = plugin_module("m", "agent")
    reg.add_module(module, distribution="dist-a")
    reg.remove_module(module)
    assert reg.names("harness") == []


# ------------------------------------------------------------------ entry points


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> list[importlib.metadata.EntryPoint]:
    """Replace the installed entry points of the group with fakes backed by sys.modules."""
    monkeypatch.delenv("LEGORL_LOAD_PLUGINS", raising=False)
    for name, harness in (("legorl_fake_a", "agent-a"), ("legorl_fake_b", "agent-b")):
        monkeypatch.setitem(sys.modules, name, plugin_module(name, harness))
    eps = [
        importlib.metadata.EntryPoint("a", "legorl_fake_a", GROUP),
        importlib.metadata.EntryPoint("b", "legorl_fake_b", GROUP),
    ]

    def fake(**kwargs: Any) -> list[importlib.metadata.EntryPoint]:
        assert kwargs == {"group": GROUP}
        return eps

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    return eps


def test_load_entry_points(entry_points: list[Any]) -> None:
    assert Registry.discover().names("harness") == ["agent-a", "agent-b"]


def test_allow_list_restricts_entry_points(
    entry_points: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEGORL_LOAD_PLUGINS", "b, other")
    assert Registry.discover().names("harness") == ["agent-b"]
    monkeypatch.setenv("LEGORL_LOAD_PLUGINS", "")
    assert Registry.discover().names("harness") == []


def test_entry_point_that_fails_to_import_is_named(entry_points: list[Any]) -> None:
    entry_points.append(
        importlib.metadata.EntryPoint("broken", "legorl_fake_missing.plugin", GROUP)
    )
    with pytest.raises(RegistryError) as info:
        Registry.discover()
    message = str(info.value)
    assert "plugin entry point 'broken' (legorl_fake_missing.plugin)" in message
    assert "failed to import: ModuleNotFoundError" in message
    assert "LEGORL_LOAD_PLUGINS" in message


def test_entry_point_with_a_misspelled_hook_is_named(
    entry_points: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    module = types.ModuleType("legorl_fake_typo")

    @hookimpl
    def legorl_register_harnes(register: Any) -> None:
        register("x", make, options=Options)

    module.legorl_register_harnes = legorl_register_harnes  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "legorl_fake_typo", module)
    entry_points.append(importlib.metadata.EntryPoint("typo", "legorl_fake_typo", GROUP))
    with pytest.raises(RegistryError, match="entry point 'typo' .* failed to register"):
        Registry.discover()


class Tools:
    """A plugin that adds a benchmark, a command, a tokenizer and an attack (the tools hooks)."""

    @hookimpl
    def legorl_register_benchmarks(self, register: Any) -> None:
        register("echo", lambda args: {"args": args})

    @hookimpl
    def legorl_register_tokenizers(self, register: Any) -> None:
        register("bytes", lambda: "a tokenizer")

    @hookimpl
    def legorl_register_attacks(self, register: Any) -> None:
        register(SimpleNamespace(name="echo-fix", category="network", what="x", commands=("true",)))

    @hookimpl
    def legorl_register_commands(self, cli: Any) -> None:
        @cli.command("hello")
        def hello() -> None:
            """Say hello."""
            print("hello from a plugin")


def test_plugins_add_benchmarks_and_commands() -> None:
    import typer
    from typer.testing import CliRunner

    registry = Registry()
    tools = Tools()
    registry.add_module(tools, name="tools")
    assert registry.benchmarks()["echo"](["--x"]) == {"args": ["--x"]}
    app = typer.Typer()
    app.command("noop")(lambda: None)
    registry.add_commands(app)
    assert CliRunner().invoke(app, ["hello"]).stdout == "hello from a plugin\n"
    with pytest.raises(RegistryError, match="benchmark 'echo' registered twice"):
        registry.add_module(Tools(), name="tools-again")
    assert registry.tokenizer("bytes") == "a tokenizer"
    assert [a.name for a in registry.attacks()] == ["echo-fix"]
    with pytest.raises(RegistryError, match="no plugin registers a tokenizer 'qwen9'.*bytes"):
        registry.tokenizer("qwen9")
    registry.remove_module(tools)
    assert "echo" not in registry.benchmarks() and registry.attacks() == []


def test_first_party_benchmarks_and_the_redteam_command_come_through_the_registry() -> None:
    registry = Registry.discover()
    assert {"sandbox", "consistency", "inference"} <= set(registry.benchmarks())
    assert len(registry.attacks()) >= 80  # legorl-std's red team, for the sandbox contracts
    from lego_rl.cli.main import app

    assert "redteam" in {c.name or c.callback.__name__ for c in app.registered_commands}
