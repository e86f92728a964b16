"""The legorl command line, against a registry of test plugins defined here (hermetic)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ConfigDict
from typer.testing import CliRunner

from lego_rl import hookimpl
from lego_rl import registry as registry_module
from lego_rl.cli.main import app
from lego_rl.kinds import LoadsWeights, Problem
from lego_rl.registry import BuildContext, Registry

REPO = Path(__file__).resolve().parents[1]
CLAUDE_SPEC = REPO / "specs" / "claude-code-swe.yaml"
runner = CliRunner()


# ------------------------------------------------------------------ test plugins


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HarnessOptions(Strict):
    step_limit: int = 10
    shell: str = "bash"


class SandboxOptions(Strict):
    warn: bool = False


class TrainerOptions(Strict):
    needs_gpu: bool = False
    lr: float = 1e-5


BUILT: list[tuple[str, BuildContext]] = []


class Component:
    """A stand-in component whose preflight reports what its options ask for."""

    def __init__(self, options: BaseModel, ctx: BuildContext):
        self.options = options
        BUILT.append((type(options).__name__, ctx))

    def preflight(self) -> list[Problem]:
        if getattr(self.options, "needs_gpu", False):
            return [Problem("CUDA is not available", fix="run on a machine with a GPU")]
        if getattr(self.options, "warn", False):
            return [Problem("sandbox is slow here", fatal=False)]
        return []


class Exploding:
    def __init__(self, options: BaseModel, ctx: BuildContext):
        raise RuntimeError("boom")


class Pusher(Component):
    """A trainer that pushes its weights to inference (declares :class:`NeedsInference`)."""

    inference_needs = (LoadsWeights,)


class TakesWeights(Component):
    def load_weights(self, state_dict: dict[str, Any], version: int) -> None: ...


class FakePlugins:
    @hookimpl
    def legorl_register_tasks(self, register: Any) -> None:
        register("t-tasks", Component)

    @hookimpl
    def legorl_register_sandbox(self, register: Any) -> None:
        register("t-sandbox", Component, options=SandboxOptions)

    @hookimpl
    def legorl_register_harness(self, register: Any) -> None:
        register("t-harness", Component, options=HarnessOptions)

    @hookimpl
    def legorl_register_dialect(self, register: Any) -> None:
        register("t-dialect", Component)

    @hookimpl
    def legorl_register_verifier(self, register: Any) -> None:
        register("t-verifier", Component)

    @hookimpl
    def legorl_register_filter(self, register: Any) -> None:
        register("t-filter", Component)

    @hookimpl
    def legorl_register_optimizer(self, register: Any) -> None:
        register("t-optimizer", Component)

    @hookimpl
    def legorl_register_inference(self, register: Any) -> None:
        register("t-inference", Component)
        register("t-exploding", Exploding)
        register("t-takes-weights", TakesWeights)

    @hookimpl
    def legorl_register_trainer(self, register: Any) -> None:
        register("embedded", Component, options=TrainerOptions)
        register("t-pusher", Pusher)

    @hookimpl
    def legorl_register_observer(self, register: Any) -> None:
        register("t-store", Component)


SPEC: dict[str, Any] = {
    "model": {"name": "tiny"},
    "run": {"steps": 1, "output_dir": "out"},
    "tasks": {"plugin": "t-tasks"},
    "sandbox": {"plugin": "t-sandbox"},
    "harness": {"plugin": "t-harness", "options": {"step_limit": 3}},
    "dialect": {"plugin": "t-dialect"},
    "verifier": {"plugin": "t-verifier"},
    "filter": {"plugin": "t-filter"},
    "optimizer": {"plugin": "t-optimizer"},
    "inference": {"plugin": "t-inference"},
    "trainer": {"plugin": "embedded"},
    "observer": [{"plugin": "t-store"}],
}


@pytest.fixture(autouse=True)
def hermetic(monkeypatch: pytest.MonkeyPatch) -> Registry:
    """No LEGORL_* from the caller's environment; the CLI sees only the test plugins."""
    import os

    for name in [n for n in os.environ if n.upper().startswith("LEGORL_")]:
        monkeypatch.delenv(name)
    reg = Registry()
    reg.add_module(FakePlugins(), name="test-plugins", distribution="legorl-std", version="9.9")
    monkeypatch.setattr(registry_module, "_default", reg)
    BUILT.clear()
    return reg


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    return path


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A stand-in for lego_rl.engine.run that records what apply hands it."""
    calls: list[dict[str, Any]] = []
    fake = types.ModuleType("lego_rl.engine.run")

    def apply(**kwargs: Any) -> Path:
        calls.append(kwargs)
        return Path("out/run")

    fake.apply = apply  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lego_rl.engine.run", fake)
    return calls


def invoke(*args: str, **env: str) -> Any:
    return runner.invoke(app, [str(a) for a in args], env=env or None)


# ------------------------------------------------------------------ validate


def test_validate_ok(spec_file: Path) -> None:
    result = invoke("validate", spec_file)
    assert result.exit_code == 0, result.output
    assert "OK" in result.output


def test_validate_option_typo_names_its_path(spec_file: Path) -> None:
    result = invoke("validate", spec_file, "harness.options.step_limt=5")
    assert result.exit_code == 2
    assert "harness.options.step_limt: Extra inputs are not permitted" in result.output
    assert "Traceback" not in result.output


def test_validate_unknown_plugin_suggests_close_match(spec_file: Path) -> None:
    result = invoke("validate", spec_file, "trainer.plugin=embeded")
    assert result.exit_code == 2
    assert (
        "trainer.plugin: unknown trainer plugin 'embeded' (available: embedded, t-pusher); "
        "did you mean 'embedded'?"
    ) in result.output


def test_validate_wrong_type(spec_file: Path) -> None:
    result = invoke("validate", spec_file, "run.steps=many", "harness.options.step_limit=x")
    assert result.exit_code == 2
    assert "run.steps: Input should be a valid integer" in result.output
    assert "harness.options.step_limit: Input should be a valid integer" in result.output


def test_validate_reports_every_error_at_once(spec_file: Path) -> None:
    result = invoke(
        "validate",
        spec_file,
        "run.steps=0",
        "run.bogus=1",
        "harness.options.shel=zsh",
        "dialect.plugin=t-dialekt",
    )
    assert result.exit_code == 2
    assert "4 errors" in result.output
    for path in ("run.steps:", "run.bogus:", "harness.options.shel:", "dialect.plugin:"):
        assert path in result.output


def test_validate_several_specs_fails_if_any_fails(spec_file: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump({**SPEC, "harness": {"plugin": "t-harness", "options": {"x": 1}}})
    )
    result = invoke("validate", spec_file, bad)
    assert result.exit_code == 2
    assert f"{spec_file}: OK" in result.output
    assert "harness.options.x" in result.output


def test_validate_env_override(spec_file: Path) -> None:
    result = invoke("validate", spec_file, LEGORL_RUN__STEPS="zero")
    assert result.exit_code == 2
    assert "run.steps: Input should be a valid integer" in result.output
    assert invoke("validate", spec_file, LEGORL_RUN__STEPS="3").exit_code == 0


def test_validate_missing_file() -> None:
    result = invoke("validate", "nowhere.yaml")
    assert result.exit_code == 2
    assert "file not found" in result.output


def test_validate_claude_code_swe_warns_about_missing_plugins() -> None:
    result = invoke("validate", CLAUDE_SPEC)
    assert result.exit_code == 0, result.output
    assert "warning harness.plugin: harness plugin 'claude-code' " in result.output
    assert "legorl-claude-code" in result.output


# ------------------------------------------------------------------ plan


def test_plan_ready_shows_options_with_defaults(spec_file: Path) -> None:
    result = invoke("plan", spec_file, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["ready"] is True
    assert data["options"]["harness"] == {"step_limit": 3, "shell": "bash"}
    assert data["options"]["trainer"] == {"needs_gpu": False, "lr": 1e-5}
    assert data["run"]["steps"] == 1 and data["run"]["group_size"] == 2
    harness = next(p for p in data["plugins"] if p["path"] == "harness")
    assert harness == {
        "path": "harness",
        "kind": "harness",
        "name": "t-harness",
        "distribution": "legorl-std",
        "version": "9.9",
        "installed": True,
    }


def test_plan_builds_components_with_spec_context(spec_file: Path) -> None:
    assert invoke("plan", spec_file).exit_code == 0
    assert len(BUILT) == 10
    ctx = BUILT[0][1]
    assert ctx.spec is not None and ctx.spec.model.name == "tiny"
    assert ctx.spec_dir == spec_file.parent
    assert ctx.run_dir is not None and ctx.run_dir.parts[-2:] == ("out", "run")


def test_plan_fatal_preflight_needs_gpu(spec_file: Path) -> None:
    result = invoke("plan", spec_file, "trainer.options.needs_gpu=true")
    assert result.exit_code == 1
    assert "CUDA is not available" in result.output
    assert "needs a GPU" in result.output
    data = json.loads(invoke("plan", spec_file, "trainer.options.needs_gpu=true", "--json").output)
    assert data["ready"] is False and data["needs_gpu"] == ["trainer"]


def test_plan_warning_is_not_fatal(spec_file: Path) -> None:
    result = invoke("plan", spec_file, "sandbox.options.warn=true")
    assert result.exit_code == 0
    assert "sandbox is slow here" in result.output


def test_plan_component_that_fails_to_build_is_fatal(spec_file: Path) -> None:
    result = invoke("plan", spec_file, "inference.plugin=t-exploding")
    assert result.exit_code == 1
    assert "could not be built: RuntimeError: boom" in result.output
    assert "Traceback" not in result.output


def test_plan_spec_error_exits_2(spec_file: Path) -> None:
    result = invoke("plan", spec_file, "harness.options.step_limt=1", "--json")
    assert result.exit_code == 2
    errors = json.loads(result.output)["errors"]
    assert errors == [
        {"path": "harness.options.step_limt", "message": "Extra inputs are not permitted"}
    ]


def test_plan_claude_code_swe_lists_missing_plugins() -> None:
    result = invoke("plan", CLAUDE_SPEC)
    assert result.exit_code == 1
    assert "not ready" in result.output
    assert "harness: harness plugin 'claude-code' " in result.output
    assert "legorl-claude-code" in result.output
    assert "needs a GPU" in result.output
    data = json.loads(invoke("plan", CLAUDE_SPEC, "--json").output)
    missing = {(m["kind"], m["name"]) for m in data["missing"]}
    assert ("trainer", "verl") in missing and ("sandbox", "harbor") in missing
    assert len(missing) == 16  # every block of the spec
    assert all(m["how"] for m in data["missing"])
    assert data["options"]["trainer"]["gpus_per_node"] == 8
    assert data["model"]["max_context"] == 65536


# ------------------------------------------------------------------ apply


def test_apply_refuses_claude_code_swe_and_starts_nothing(
    engine: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("apply", CLAUDE_SPEC)
    assert result.exit_code == 1
    assert "refusing to start" in result.output
    assert "trainer: trainer plugin 'verl' " in result.output and "legorl-verl" in result.output
    assert engine == []
    assert list(tmp_path.iterdir()) == []


def test_a_trainer_refuses_an_inference_without_a_capability_it_needs(
    spec_file: Path, engine: list[dict[str, Any]]
) -> None:
    result = invoke("apply", spec_file, "trainer.plugin=t-pusher")
    assert result.exit_code == 1 and engine == []
    assert "inference (t-inference): trainer 't-pusher' needs an inference backend that offers LoadsWeights" in " ".join(
        result.output.split()
    )
    assert "Traceback" not in result.output
    assert invoke("plan", spec_file, "trainer.plugin=t-pusher", "inference.plugin=t-takes-weights").exit_code == 0


def test_apply_refuses_fatal_preflight(spec_file: Path, engine: list[dict[str, Any]]) -> None:
    result = invoke("apply", spec_file, "trainer.options.needs_gpu=true")
    assert result.exit_code == 1
    assert "CUDA is not available" in result.output
    assert engine == []


def test_apply_runs_the_engine_with_overrides(
    spec_file: Path, engine: list[dict[str, Any]]
) -> None:
    result = invoke("apply", spec_file, "run.steps=3", LEGORL_RUN__GROUP_SIZE="4")
    assert result.exit_code == 0, result.output
    assert "run finished" in result.output
    [call] = engine
    spec = call["resolved"].spec
    assert (spec.run.steps, spec.run.group_size) == (3, 4)
    assert call["spec_path"] == spec_file
    assert call["registry"] is registry_module._default


def test_apply_spec_error_exits_2(spec_file: Path, engine: list[dict[str, Any]]) -> None:
    result = invoke("apply", spec_file, "trainer.plugin=nope")
    assert result.exit_code == 2
    assert engine == []


# ------------------------------------------------------------------ schema, plugins, version


def test_schema_write_and_check(tmp_path: Path) -> None:
    out = tmp_path / "schemas" / "spec.schema.json"
    assert invoke("schema", "--output", out).exit_code == 0
    schema = json.loads(out.read_text())
    assert schema["$defs"]["HarnessBlock"]["properties"]["plugin"]["examples"] == ["t-harness"]
    assert invoke("schema", "--check", "--output", out).exit_code == 0
    out.write_text(out.read_text().replace("t-harness", "t-old"))
    stale = invoke("schema", "--check", "--output", out)
    assert stale.exit_code == 1
    assert "is stale" in stale.output and "legorl schema" in stale.output


def test_schema_installed_prints_to_stdout() -> None:
    result = invoke("schema", "--installed")
    assert result.exit_code == 0
    assert json.loads(result.output)["$schema"].endswith("2020-12/schema")


def test_plugins_json() -> None:
    result = invoke("plugins", "--json")
    assert result.exit_code == 0
    rows = json.loads(result.output)
    assert {
        "kind": "harness",
        "name": "t-harness",
        "distribution": "legorl-std",
        "version": "9.9",
        "doc": "A stand-in component whose preflight reports what its options ask for.",
    } in rows
    table = invoke("plugins")
    assert "t-harness" in table.output and "legorl-std" in table.output


def test_registry_error_is_reported_without_traceback(
    spec_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> Registry:
        raise registry_module.RegistryError("plugin entry point 'x' failed to import")

    monkeypatch.setattr(registry_module, "default_registry", broken)
    result = invoke("validate", spec_file)
    assert result.exit_code == 1
    assert "failed to import" in result.output and "Traceback" not in result.output


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0 and result.output.startswith("legorl ")
