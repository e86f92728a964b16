"""Loading a spec (YAML, LEGORL_* environment, dotted overrides) and resolving it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ConfigDict

from lego_rl import hookimpl
from lego_rl.registry import Registry
from lego_rl.spec.load import SpecError, apply_override, env_overrides, load_spec
from lego_rl.spec.resolve import load_and_resolve, resolve

SPEC: dict[str, Any] = {
    "model": {"name": "tiny"},
    "tasks": {"plugin": "harbor-dir", "options": {"path": "tasks"}},
    "sandbox": {"plugin": "local"},
    "harness": {"plugin": "agent", "options": {"step_limit": 3}},
    "dialect": {"plugin": "openai-chat"},
    "verifier": {"plugin": "test-script"},
    "anticheat": [{"plugin": "no-network"}],
    "optimizer": {"plugin": "grpo"},
    "inference": {"plugin": "hf"},
    "trainer": {"plugin": "embedded"},
}


@pytest.fixture(autouse=True)
def no_legorl_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.upper().startswith("LEGORL_")]:
        monkeypatch.delenv(name)


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    return path


def errors_of(exc: pytest.ExceptionInfo[SpecError]) -> dict[str, str]:
    return dict(exc.value.errors)


# ------------------------------------------------------------------ load


def test_load_fills_defaults(spec_file: Path) -> None:
    spec = load_spec(spec_file)
    assert spec.run.steps == 2 and spec.model.max_context == 8192
    assert [b.plugin for b in spec.observer] == ["store"] and spec.filter.plugin == "none"
    assert ("anticheat.0", "anticheat") in [(p, k) for p, k, _ in spec.blocks()]
    assert ("observer.0", "observer") in [(p, k) for p, k, _ in spec.blocks()]


def test_a_block_under_its_earlier_name_is_read(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "observe": [{"plugin": "jsonl"}]}))
    spec = load_spec(path)
    assert [b.plugin for b in spec.observer] == ["jsonl"]
    assert "observe" not in spec.model_dump()


def test_a_block_under_both_names_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "observe": [{"plugin": "jsonl"}], "observer": [{"plugin": "store"}]}))
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert "earlier name of `observer`" in str(exc.value)


def test_an_override_may_name_a_block_by_either_name(spec_file: Path) -> None:
    assert load_spec(spec_file, ["observe=[]"]).observer == []
    assert [b.plugin for b in load_spec(spec_file, ["observe.0.plugin=jsonl"]).observer] == ["jsonl"]
    assert load_spec(spec_file, ["observe=[]", "observer.0.plugin=jsonl"]).observer[0].plugin == "jsonl"


def test_an_env_variable_may_name_a_block_by_either_name(spec_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEGORL_OBSERVE__0__PLUGIN", "jsonl")
    assert env_overrides({"LEGORL_OBSERVE__0__PLUGIN": "jsonl"}) == ["observe.0.plugin=jsonl"]
    assert [b.plugin for b in load_spec(spec_file).observer] == ["jsonl"]


def test_a_run_saved_under_the_earlier_name_resumes(tmp_path: Path, spec_file: Path) -> None:
    from lego_rl.engine.resume import SPEC_FILE, spec_matches

    spec = load_spec(spec_file)
    saved = spec.model_dump(mode="json")
    saved["observe"] = saved.pop("observer")
    (tmp_path / SPEC_FILE).write_text(yaml.safe_dump(saved))
    assert spec_matches(tmp_path, spec)
    saved["observe"] = [{"plugin": "jsonl", "options": {}}]
    (tmp_path / SPEC_FILE).write_text(yaml.safe_dump(saved))
    assert not spec_matches(tmp_path, spec)


def test_env_overrides(spec_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEGORL_RUN__STEPS", "3")
    monkeypatch.setenv("LEGORL_ANTICHEAT__0__PLUGIN", "git-history")
    monkeypatch.setenv("LEGORL_HARNESS__OPTIONS__STEP_LIMIT", "7")
    monkeypatch.setenv("LEGORL_LOAD_PLUGINS", "std")  # not a spec field: left alone
    monkeypatch.setenv("LEGORL_CACHE_DIR", "/tmp/x")  # a plugin's own setting: left alone
    spec = load_spec(spec_file)
    assert spec.run.steps == 3
    assert spec.anticheat[0].plugin == "git-history"
    assert spec.harness.options == {"step_limit": 7}
    assert load_spec(spec_file, use_env=False).run.steps == 2


def test_env_overrides_are_dotted() -> None:
    env = {
        "LEGORL_RUN__STEPS": "3",
        "LEGORL_MODEL__NAME": "m",
        "LEGORL_LOAD_PLUGINS": "",
        "PATH": "/bin",
    }
    assert env_overrides(env) == ["model.name=m", "run.steps=3"]


def test_dotted_overrides(spec_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEGORL_RUN__STEPS", "5")
    spec = load_spec(
        spec_file,
        [
            "run.steps=3",  # wins over the environment
            "trainer.plugin=other",
            "anticheat.0.plugin=x",
            "anticheat.1.plugin=y",  # one past the end appends
            "inference.options.devices=[0, 1]",
            "model.dtype=bfloat16",
        ],
    )
    assert spec.run.steps == 3
    assert spec.trainer.plugin == "other"
    assert [b.plugin for b in spec.anticheat] == ["x", "y"]
    assert spec.inference.options == {"devices": [0, 1]}
    assert spec.model.dtype == "bfloat16"


@pytest.mark.parametrize(
    ("override", "path", "message"),
    [
        ("run.steps", "run.steps", "expected KEY=VALUE"),
        ("anticheat.5.plugin=x", "anticheat.5", "list index '5' out of range (1 items"),
        ("run.name.first=x", "run.name.first", "run.name is 'r', not a mapping or list"),
    ],
)
def test_bad_overrides(override: str, path: str, message: str) -> None:
    data = {"run": {"name": "r"}, "anticheat": [{"plugin": "a"}]}
    with pytest.raises(SpecError) as exc:
        apply_override(data, override)
    assert message in errors_of(exc)[path]


def test_structural_errors_all_at_once(spec_file: Path) -> None:
    with pytest.raises(SpecError) as exc:
        load_spec(
            spec_file, ["run.steps=abc", "run.group_size=0", "colour=red", "harness.plugni=x"]
        )
    errors = errors_of(exc)
    assert errors["run.steps"].startswith("Input should be a valid integer")
    assert errors["run.group_size"] == "Input should be greater than or equal to 1"
    assert errors["colour"] == "Extra inputs are not permitted"
    assert errors["harness.plugni"] == "Extra inputs are not permitted"


@pytest.mark.parametrize(
    ("text", "message"), [("- a\n- b\n", "a spec must be a YAML mapping"), ("a: [", "invalid YAML")]
)
def test_unreadable_yaml(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert message in exc.value.errors[0][1]


# ------------------------------------------------------------------ resolve


class AgentOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step_limit: int = 10


class Agent:
    dialect = "openai-chat"

    def __init__(self, options: AgentOptions, ctx: object):
        self.options = options


class AgentPlugin:
    @hookimpl
    def legorl_register_harness(self, register: Any) -> None:
        register("agent", Agent, options=AgentOptions)


@pytest.fixture
def registry() -> Registry:
    reg = Registry()
    reg.add_module(AgentPlugin(), distribution="acme-agent")
    return reg


def test_resolve_validates_options_and_reports_missing_first_party(
    spec_file: Path, registry: Registry
) -> None:
    resolved = resolve(load_spec(spec_file), registry)
    assert resolved.options("harness") == AgentOptions(step_limit=3)
    missing = {b.path: b.missing for b in resolved.missing}
    assert "harness" not in missing
    assert missing["trainer"].startswith("trainer plugin 'embedded' ")
    assert "legorl-embedded" in missing["trainer"]
    assert set(missing) == {p for p, _, _ in resolved.spec.blocks()} - {"harness"}


def test_resolve_option_typo_and_unknown_plugin(spec_file: Path, registry: Registry) -> None:
    spec = load_spec(spec_file, ["harness.options.step_limt=4", "sandbox.plugin=lokal"])
    with pytest.raises(SpecError) as exc:
        resolve(spec, registry)
    errors = errors_of(exc)
    assert errors["harness.options.step_limt"] == "Extra inputs are not permitted"
    assert errors["sandbox.plugin"] == "unknown sandbox plugin 'lokal' (available: none installed)"


def test_resolve_checks_the_harness_dialect(spec_file: Path, registry: Registry) -> None:
    spec = load_spec(spec_file, ["dialect.plugin=anthropic-messages"])
    with pytest.raises(SpecError) as exc:
        resolve(spec, registry)
    assert (
        errors_of(exc)["dialect.plugin"]
        == "harness 'agent' speaks 'openai-chat', not 'anthropic-messages'"
    )


def test_load_and_resolve_reports_structure_and_options_together(
    spec_file: Path, registry: Registry
) -> None:
    with pytest.raises(SpecError) as exc:
        load_and_resolve(spec_file, registry, ["run.steps=x", "harness.options.step_limit=many"])
    errors = errors_of(exc)
    assert set(errors) == {"run.steps", "harness.options.step_limit"}
    assert exc.value.source == str(spec_file)


def test_env_overrides_accept_json_blocks() -> None:
    env = {"LEGORL_RUN": '{"steps": 4, "name": "x"}', "LEGORL_TRAINER__OPTIONS__LR": "0.001"}
    assert env_overrides(env) == ["run.name=x", "run.steps=4", "trainer.options.lr=0.001"]
