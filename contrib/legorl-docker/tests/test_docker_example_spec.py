"""The example spec validates against the schema of the installed plugins, with jsonschema
alone (what a CI that only has the schema file would run)."""

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import yaml

EXAMPLE = Path(__file__).parents[1] / "examples" / "spec.yaml"


def installed_schema(tmp_path: Path) -> dict:
    out = tmp_path / "spec.schema.json"
    cli = [sys.executable, "-m", "lego_rl.cli.main", "schema", "--installed", "--output", str(out)]
    subprocess.run(cli, check=True, capture_output=True)
    return json.loads(out.read_text())


def test_example_spec_is_valid(tmp_path: Path) -> None:
    schema = installed_schema(tmp_path)
    jsonschema.Draft202012Validator(schema).validate(yaml.safe_load(EXAMPLE.read_text()))


def test_schema_checks_this_plugins_options(tmp_path: Path) -> None:
    schema = installed_schema(tmp_path)
    spec = yaml.safe_load(EXAMPLE.read_text())
    block = spec["sandbox"]
    entry = next(e for e in (block if isinstance(block, list) else [block]) if e["plugin"] == "docker")
    entry["options"] = {"no_such_option_of_legorl_docker": 1}
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(spec))
    assert errors, "the installed schema must reject an unknown option of docker"
