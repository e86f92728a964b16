"""The shipped quickstart tasks and the ``harbor-dir`` task source."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import legorl_std.tasks.harbor_dir as harbor_tasks
import pytest
from legorl_std.tasks.harbor_dir import HarborDirTasks, TaskSourceError

from lego_rl.registry import BuildContext, Registry

QUICKSTART = Path(__file__).resolve().parents[1] / "tasks" / "quickstart"
SHIPPED = sorted(p.name for p in QUICKSTART.iterdir() if p.is_dir())


def test_six_shipped_tasks_load():
    tasks = HarborDirTasks(QUICKSTART).tasks()
    assert [t.name for t in tasks] == SHIPPED and len(tasks) == 6
    for task in tasks:
        assert task.path == QUICKSTART / task.name
        assert "/app/" in task.instruction, f"{task.name}: the instruction should name the file"
        assert task.config["schema_version"] == "1.4"
        assert task.config["environment"]["network_mode"] == "no-network"
        assert 0 < task.verifier_timeout <= 120 and 0 < task.agent_timeout <= 600


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_task_layout(name: str):
    task = QUICKSTART / name
    dockerfile = (task / "environment" / "Dockerfile").read_text()
    assert dockerfile.startswith("FROM python:3.12-slim") and "WORKDIR /app" in dockerfile
    app_files = [p for p in (task / "environment" / "app").rglob("*") if p.is_file()]
    assert 1 <= len(app_files) <= 3, "keep each repo tiny: a small model must see all of it"
    assert "reward.txt" in (task / "tests" / "test.sh").read_text()
    assert list((task / "tests").glob("test_*.py"))
    assert (task / "solution" / "solve.sh").is_file()
    tomllib.loads((task / "task.toml").read_text())


def test_one_task_dir_and_globs(tmp_path: Path):
    single = HarborDirTasks(QUICKSTART / "fix-square").tasks()
    assert [t.name for t in single] == ["fix-square"]
    picked = HarborDirTasks(QUICKSTART, include=["fix-*"], exclude=["*-square", "fix-pass*"]).tasks()
    assert "fix-square" not in {t.name for t in picked} and len(picked) == 4
    with pytest.raises(TaskSourceError, match=r"no task under .* matches include"):
        HarborDirTasks(QUICKSTART, include=["nothing-*"]).tasks()


def test_missing_path_is_named(tmp_path: Path):
    with pytest.raises(TaskSourceError, match=f"{tmp_path / 'nope'} does not exist"):
        HarborDirTasks(tmp_path / "nope").tasks()
    with pytest.raises(TaskSourceError, match="no task directories"):
        HarborDirTasks(tmp_path).tasks()


def test_dir_without_task_files(tmp_path: Path):
    shutil.copytree(QUICKSTART / "fix-average", tmp_path / "good")
    (tmp_path / "stray").mkdir()
    (tmp_path / "stray" / "task.toml").write_text("")
    with pytest.raises(TaskSourceError, match=r"stray is not a Harbor task: instruction.md is missing"):
        HarborDirTasks(tmp_path).tasks()
    assert [t.name for t in HarborDirTasks(tmp_path, exclude=["stray"]).tasks()] == ["good"]


def test_invalid_toml_names_the_file(tmp_path: Path):
    task = tmp_path / "broken"
    shutil.copytree(QUICKSTART / "fix-average", task)
    (task / "task.toml").write_text("[verifier\ntimeout_sec = 1\n")
    with pytest.raises(TaskSourceError, match=f"{task / 'task.toml'}: invalid TOML"):
        HarborDirTasks(tmp_path).tasks()
    (task / "task.toml").write_text('[verifier]\ntimeout_sec = "soon"\n')
    with pytest.raises(TaskSourceError, match="timeout_sec must be a positive number"):
        HarborDirTasks(tmp_path).tasks()


def test_registered_and_relative_to_spec(tmp_path: Path):
    registry = Registry()
    registry.add_module(harbor_tasks, name="harbor-tasks-under-test")
    ctx = BuildContext(spec_dir=QUICKSTART.parent / "quickstart" / "fix-average")
    source = registry.build("tasks", "harbor-dir", {"path": "..", "include": ["fix-count*"]}, ctx)
    assert [t.name for t in source.tasks()] == ["fix-countdown"]
    with pytest.raises(Exception, match="extra"):
        registry.build("tasks", "harbor-dir", {"path": ".", "pth": "typo"}, ctx)
