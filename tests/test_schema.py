"""The spec's JSON Schema: structure, per-plugin options, determinism, and freshness."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel, ConfigDict

from lego_rl import hookimpl
from lego_rl.registry import Registry
from lego_rl.spec.schema import DRAFT, dumps, schema_errors, spec_schema

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "schemas" / "spec.schema.json"
SPECS = sorted((REPO / "specs").glob("*.yaml"))


class Nested(BaseModel):
    model_config = ConfigDict(extra="forbid")
    depth: int = 1


class AgentOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step_limit: int = 10
    nested: Nested = Nested()


class AcmeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    secret: str = ""


class Ours:
    @hookimpl
    def legorl_register_harness(self, register: Any) -> None:
        register("agent", object, options=AgentOptions)


class Theirs:
    @hookimpl
    def legorl_register_harness(self, register: Any) -> None:
        register("acme", object, options=AcmeOptions)


@pytest.fixture
def registry() -> Registry:
    reg = Registry()
    reg.add_module(Ours(), distribution="legorl-std")
    reg.add_module(Theirs(), distribution="acme-plugins")
    return reg


def spec(harness: dict[str, Any]) -> dict[str, Any]:
    block = {"plugin": "x"}
    return {
        "model": {"name": "m"},
        **{
            k: block
            for k in (
                "tasks",
                "sandbox",
                "dialect",
                "verifier",
                "optimizer",
                "inference",
                "trainer",
            )
        },
        "harness": harness,
    }


def errors(schema: dict[str, Any], data: dict[str, Any]) -> list[str]:
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]


def test_schema_is_valid_draft_2020_12(registry: Registry) -> None:
    schema = spec_schema(registry)
    assert schema["$schema"] == DRAFT
    jsonschema.Draft202012Validator.check_schema(schema)


def test_first_party_options_are_checked(registry: Registry) -> None:
    schema = spec_schema(registry)
    harness = schema["$defs"]["HarnessBlock"]
    assert harness["properties"]["plugin"]["examples"] == ["agent"]
    assert errors(schema, spec({"plugin": "agent", "options": {"step_limit": 3}})) == []
    assert errors(schema, spec({"plugin": "agent", "options": {"step_limt": 3}})) == [
        "Additional properties are not allowed ('step_limt' was unexpected)"
    ]
    assert errors(schema, spec({"plugin": "agent", "options": {"nested": {"depth": "deep"}}})) == [
        "'deep' is not of type 'integer'"
    ]


def test_unknown_and_third_party_plugins_pass(registry: Registry) -> None:
    schema = spec_schema(registry)
    assert errors(schema, spec({"plugin": "somebody-elses", "options": {"anything": 1}})) == []
    assert errors(schema, spec({"plugin": "acme", "options": {"anything": 1}})) == []


def test_installed_includes_third_parties(registry: Registry) -> None:
    schema = spec_schema(registry, include=lambda _info: True)
    assert schema["$defs"]["HarnessBlock"]["properties"]["plugin"]["examples"] == ["acme", "agent"]
    assert errors(schema, spec({"plugin": "acme", "options": {"anything": 1}})) != []


def test_structure_is_still_checked(registry: Registry) -> None:
    schema = spec_schema(registry)
    data = spec({"plugin": "agent", "option": {}})
    data["run"] = {"steps": "three"}
    assert sorted(errors(schema, data)) == [
        "'three' is not of type 'integer'",
        "Additional properties are not allowed ('option' was unexpected)",
    ]


def test_output_is_deterministic(registry: Registry) -> None:
    text = dumps(spec_schema(registry))
    assert text == dumps(spec_schema(registry)) and text.endswith("}\n")
    assert list(json.loads(text)) == sorted(json.loads(text))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_every_shipped_spec_matches_the_committed_schema(path: Path) -> None:
    schema = json.loads(COMMITTED.read_text())
    data = yaml.safe_load(path.read_text())
    assert errors(schema, data) == []
    assert path.read_text().startswith("#"), "a shipped spec opens with a comment header"


@pytest.mark.slow  # imports every installed plugin (torch, transformers): ~10-25 s here
def test_committed_schema_is_fresh() -> None:
    """`legorl schema` would write exactly the committed file for the installed plugins."""
    result = subprocess.run(
        [sys.executable, "-m", "lego_rl.cli.main", "schema", "--check"],
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("LEGORL_")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_errors_name_the_spec_path(registry: Registry) -> None:
    schema = spec_schema(registry, include=lambda _info: True)
    data = spec({"plugin": "acme", "options": {"secrte": "x"}})
    assert schema_errors(data, schema) == [
        ("harness.options", "Additional properties are not allowed ('secrte' was unexpected)")
    ]
    assert schema_errors(spec({"plugin": "acme", "options": {"secret": "x"}}), schema) == []
