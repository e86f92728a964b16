"""`legorl new-plugin`: a generated plugin of every kind installs, registers through its entry
point, and its own tests run lego-rl's contracts for the kind, as its author would run them."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from lego_rl.kinds import KINDS
from lego_rl.scaffold import ScaffoldError, new_plugin, plugin_names
from lego_rl.testing.contracts import contracts_for

UNFINISHED = {"harness", "sandbox", "inference", "trainer"}
"""Templates that need what only their author knows (the launch command, how a sandbox starts,
how the model samples, how the policy updates): as generated they pass the structural contract and fail the others."""


def _name(kind: str) -> str:
    return f"my-{kind}"


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Every kind generated with the CLI and pip-installed (not editable) into one target."""
    root = tmp_path_factory.mktemp("generated")
    for kind in KINDS:
        subprocess.run(
            [sys.executable, "-m", "lego_rl.cli.main", "new-plugin", kind, _name(kind), "--dir", str(root)],
            check=True, capture_output=True,
        )  # fmt: skip
    target = tmp_path_factory.mktemp("site")
    dists = [str(root / plugin_names(kind, _name(kind)).dist) for kind in KINDS]
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--target", str(target), *dists],
        check=True, capture_output=True,
    )  # fmt: skip
    return root, target


def _pytest_in(package: Path, site: Path, tmp: Path) -> dict[str, tuple[str, str]]:
    """Run `pytest` in the generated package with it installed; test name -> (outcome, message)."""
    report = tmp / "report.xml"
    env = {k: v for k, v in os.environ.items() if k != "LEGORL_LOAD_PLUGINS"}
    env["PYTHONPATH"] = str(site)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", f"--junitxml={report}"],
        cwd=package, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        failed = case.find("failure")
        if failed is None:
            failed = case.find("error")
        outcomes[case.get("name", "")] = (
            "passed" if failed is None else "failed",
            "" if failed is None else failed.get("message", ""),
        )
    return outcomes


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_generated_plugin_runs_its_kinds_contracts(kind: str, installed: tuple[Path, Path], tmp_path: Path) -> None:
    root, site = installed
    name = _name(kind)
    outcomes = _pytest_in(root / plugin_names(kind, name).dist, site, tmp_path)

    for contract in contracts_for(kind):
        outcome, message = outcomes[f"test_contract[{name}:{contract.id}]"]
        if kind in UNFINISHED and contract.name != "structure":
            assert outcome == "failed", f"{contract.id} passed an unfinished {kind} template"
            assert f"breaks contract {contract.id!r}" in message, message
            assert "not written yet" in message or "no launch command" in message, message
        else:
            assert outcome == "passed", f"{contract.id}: {message}"
    assert outcomes["test_example_spec_is_valid"][0] == "passed", outcomes["test_example_spec_is_valid"]
    assert outcomes["test_schema_checks_this_plugins_options"][0] == "passed"


def test_plugin_module_and_entry_point_follow_the_names(tmp_path: Path) -> None:
    target = new_plugin("harness", "my-agent", tmp_path)

    assert target.name == "legorl-my-agent"
    pyproject = (target / "pyproject.toml").read_text()
    assert 'my-agent = "legorl_my_agent.plugin"' in pyproject
    plugin = (target / "legorl_my_agent" / "plugin.py").read_text()
    assert "class MyAgentOptions(BaseModel)" in plugin and 'register("my-agent", MyAgent' in plugin
    assert "{{" not in "".join(p.read_text() for p in target.rglob("*") if p.is_file())
    spec = yaml.safe_load((target / "examples" / "spec.yaml").read_text())
    assert spec["harness"] == {"plugin": "my-agent"}


def test_list_blocks_get_the_plugin_appended(tmp_path: Path) -> None:
    spec = yaml.safe_load((new_plugin("observer", "my-sink", tmp_path) / "examples" / "spec.yaml").read_text())
    assert spec["observer"] == [{"plugin": "store"}, {"plugin": "my-sink"}]


@pytest.mark.parametrize(
    ("kind", "name", "expected"),
    [
        ("harnes", "x", "unknown plugin kind 'harnes'"),
        ("harness", "My_Agent", "lower-case letters"),
        ("harness", "-x", "lower-case letters"),
    ],
)
def test_bad_kind_or_name_is_refused(kind: str, name: str, expected: str, tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError, match=expected):
        new_plugin(kind, name, tmp_path)
    assert not any(tmp_path.iterdir())


def test_an_existing_directory_is_not_overwritten(tmp_path: Path) -> None:
    target = new_plugin("filter", "keep", tmp_path)
    (target / "legorl_keep" / "plugin.py").write_text("# mine\n")

    cli = [sys.executable, "-m", "lego_rl.cli.main", "new-plugin", "filter", "keep", "--dir", str(tmp_path)]
    done = subprocess.run(cli, capture_output=True, text=True)

    assert done.returncode == 2 and "already exists" in done.stderr + done.stdout
    assert (target / "legorl_keep" / "plugin.py").read_text() == "# mine\n"
