"""The ``bugfix`` task source: generated one-bug tasks, checked by running their own tests."""

from __future__ import annotations

import builtins
import json
import keyword
import random
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import legorl_std.tasks.bugfix.harbor as harbor
import legorl_std.tasks.bugfix_source as bugfix_tasks
import pytest
from legorl_std.tasks.bugfix import (
    BUG_KINDS,
    GeneratorError,
    ensure_tasks,
    generate_task,
    generate_tasks,
    write_task,
)
from legorl_std.tasks.bugfix.__main__ import main as cli_main
from legorl_std.tasks.bugfix.generate import build_task, draw_names
from legorl_std.tasks.bugfix.templates import TEMPLATES
from legorl_std.tasks.bugfix_source import BugfixOptions, BugfixTasks
from pydantic import ValidationError

from lego_rl.kinds import Task, TaskSource
from lego_rl.registry import BuildContext, Registry

RESERVED = {"s", "w", "v"}
"""Loop variables the templates use inside comprehensions."""


def run_check(task_dir: Path, tmp: Path, fix: bool) -> tuple[str, subprocess.CompletedProcess[str]]:
    """Run the task's test.sh on the host, /app and /logs/verifier redirected into ``tmp``."""
    app, logs = tmp / "app", tmp / "logs"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(task_dir / "environment" / "app", app)
    env = {"PATH": "/usr/bin:/bin", "APP": str(app), "LOGS": str(logs)}
    if fix:
        oracle = tomllib.loads((task_dir / "task.toml").read_text())["metadata"]["oracle_command"]
        done = subprocess.run(["bash", "-c", oracle.replace("/app/", f"{app}/")], env=env, timeout=30, check=False)
        assert done.returncode == 0, oracle
    out = subprocess.run(
        ["bash", str(task_dir / "tests" / "test.sh")], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    return (logs / "reward.txt").read_text().strip(), out


def test_oracle_scores_1_and_the_untouched_module_0(tmp_path: Path):
    """Every (level, kind) pair twice: broken -> 0 with >= 2 failing tests, oracle -> 1."""
    tasks = generate_tasks(36, seed=3)
    assert {(t.level, t.kind) for t in tasks} == {(lv, k) for lv in (1, 2, 3) for k in BUG_KINDS}
    for task in tasks:
        write_task(task, tmp_path / task.name)
        reward, out = run_check(tmp_path / task.name, tmp_path / "scratch", fix=False)
        assert (reward, out.returncode) == ("0", 1), f"{task.name}: the bug went unnoticed\n{out.stderr}"
        failed = re.search(r"FAILED \((?:failures=(\d+))?(?:, )?(?:errors=(\d+))?\)", out.stderr)
        assert failed and sum(int(n or 0) for n in failed.groups()) >= 2, (
            f"{task.name}: a special case for the instruction's example would pass\n{out.stderr}"
        )
        reward, out = run_check(tmp_path / task.name, tmp_path / "scratch", fix=True)
        assert (reward, out.returncode) == ("1", 0), f"{task.name}: oracle failed\n{out.stderr}"


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_every_template_bug_and_level_builds(split: str):
    for template in TEMPLATES:
        for bug in template.bugs:
            for level in (1, 2, 3):
                for draw in range(3):
                    rng = random.Random(f"{split}-{draw}")
                    task = build_task(template, bug, draw_names(template, split, rng), level, rng, split=split)
                    assert task.buggy_source != task.fixed_source and task.level == level
                    compile(task.tests_source, "test", "exec")
                    assert f"Change only `{task.module}.py`." in task.instruction


def test_names_are_safe_and_splits_disjoint():
    train_ids: set[str] = set()
    heldout_ids: set[str] = set()
    for template in TEMPLATES:
        for placeholder, (train, heldout) in template.names.items():
            for name in (*train, *heldout):
                assert name.isidentifier() and not keyword.iskeyword(name), name
                assert name not in dir(builtins) and name not in RESERVED, name
                if placeholder == "mod":
                    assert name not in sys.stdlib_module_names, f"module {name} shadows the stdlib"
            train_ids.update(train)
            heldout_ids.update(heldout)
    assert not train_ids & heldout_ids


def test_enough_distinct_tasks_per_split_and_no_overlap():
    sources = {}
    for split in ("train", "heldout"):
        tasks = generate_tasks(300, seed=0, split=split)
        sources[split] = {(t.buggy_source, t.fixed_source) for t in tasks}
        assert len(sources[split]) >= 250, f"{split}: only {len(sources[split])} distinct modules"
    assert not sources["train"] & sources["heldout"]
    defined = {
        split: {n for buggy, _ in pairs for n in re.findall(r"def (\w+)\(", buggy)} for split, pairs in sources.items()
    }
    assert not defined["train"] & defined["heldout"], "held-out functions must not reuse train names"


def test_deterministic_and_independent_of_count():
    assert generate_tasks(10, seed=7)[:6] == generate_tasks(6, seed=7)
    assert generate_task(7, "train", 4) == generate_task(7, "train", 4)
    assert generate_tasks(6, seed=7) != generate_tasks(6, seed=8)


def test_levels_say_less_as_they_rise():
    one, two, three = (generate_task(5, "train", 0, levels=[lv], kinds=["wrong-operator"]) for lv in (1, 2, 3))
    assert f"`{one.buggy_line}`" in one.instruction and "should be" in one.instruction
    assert f"Fix `{two.function}` so that it returns" in two.instruction
    assert "Find the bug" in three.instruction and three.buggy_line not in three.instruction
    for task in (one, two, three):
        assert f"In `/app/{task.module}.py`, `" in task.instruction and " instead of `" in task.instruction


def test_options_are_validated():
    with pytest.raises(GeneratorError, match="split must be"):
        generate_tasks(1, split="test")
    with pytest.raises(GeneratorError, match="kinds must be"):
        generate_tasks(1, kinds=["typo"])
    assert BugfixOptions(levels=[3, 1, 1]).levels == [1, 3]
    assert BugfixOptions(kinds=["wrong-return", "off-by-one"]).kinds == ["off-by-one", "wrong-return"]
    for bad in ({"levels": [5]}, {"kinds": ["typo"]}, {"levels": []}, {"count": 0}, {"sedd": 1}):
        with pytest.raises(ValidationError):
            BugfixOptions.model_validate(bad)
    with pytest.raises(ValidationError, match=r"fix_files ships level 4's candidate fixes, and levels \[1, 3\] has no 4"):
        BugfixOptions(levels=[3, 1], fix_files=True)
    assert BugfixOptions(levels=[1, 4], fix_files=True).fix_files


def test_cache_is_byte_identical_and_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    args = (8, 1, "heldout", [2, 3], ["swapped-args", "wrong-constant"])
    first, second = ensure_tasks(tmp_path / "a", *args), ensure_tasks(tmp_path / "b", *args)
    files = sorted(p.relative_to(first[0].parent) for p in first[0].parent.rglob("*") if p.is_file())
    assert len(files) == 8 * 7 + 1
    for rel in files:
        assert (first[0].parent / rel).read_bytes() == (second[0].parent / rel).read_bytes(), rel

    def must_not_generate(*_: object) -> None:
        raise AssertionError("a complete cached set was generated again")

    monkeypatch.setattr(harbor, "generate_tasks", must_not_generate)
    assert ensure_tasks(tmp_path / "a", *args) == first
    assert [p.name for p in (tmp_path / "a").iterdir()] == [first[0].parent.name], "no scratch left behind"
    manifest = json.loads((first[0].parent / "manifest.json").read_text())
    assert manifest == {**harbor.set_options(*args, fix_files=False), "tasks": [p.name for p in first]}
    assert manifest["generator_version"] == harbor.GENERATOR_VERSION
    monkeypatch.undo()
    level4 = (2, 1, "heldout", [4], ["wrong-constant"])
    assert ensure_tasks(tmp_path / "a", *level4)[0].parent != ensure_tasks(tmp_path / "a", *level4, fix_files=True)[0].parent


def test_plugin_registers_and_lists_harbor_tasks(tmp_path: Path):
    registry = Registry()
    registry.add_module(bugfix_tasks)
    assert registry.names("tasks") == ["bugfix"]
    info = registry.get("tasks", "bugfix")
    options = info.options.model_validate({"count": 6, "split": "heldout", "dir": "cache"})
    source = info.factory(options, BuildContext(spec_dir=tmp_path))
    assert isinstance(source, TaskSource) and source.root == tmp_path / "cache"
    tasks = source.tasks()
    assert [t.name for t in tasks] == [f"bugfix-heldout-{i:04d}" for i in range(6)]
    for task in tasks:
        assert isinstance(task, Task) and task.path.parent.parent == tmp_path / "cache"
        meta = task.config["metadata"]
        assert meta["split"] == "heldout" and meta["oracle_command"].startswith("sed -i ")
        assert meta["oracle_command"] in (task.path / "solution" / "solve.sh").read_text()
        assert meta["buggy_line"] in (task.path / "environment" / "app" / Path(meta["file"]).name).read_text()
        assert task.config["environment"]["network_mode"] == "no-network" and task.verifier_timeout == 60
        assert (task.path / "environment" / "Dockerfile").read_text().startswith("FROM python:3.12-slim")
    in_run = bugfix_tasks.build(BugfixOptions(count=1), BuildContext(run_dir=tmp_path / "run"))
    assert in_run.root == tmp_path / "run" / "bugfix"


def test_cli_prints_tasks(capsys: pytest.CaptureFixture[str]):
    assert cli_main(["-n", "2", "--split", "heldout", "--levels", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("=== bugfix-heldout-") == 2 and "Find the bug" in out and out.count("sed -i ") == 2


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_real_sandbox_and_verifier(tmp_path: Path):
    from legorl_std.sandbox.local import LocalSandboxBackend, LocalSandboxOptions
    from legorl_std.verifier.test_script import ScriptVerifier

    backend = LocalSandboxBackend(LocalSandboxOptions(), BuildContext(run_dir=tmp_path / "run"))
    source = BugfixTasks(BugfixOptions(count=2, seed=11, kinds=["off-by-one", "swapped-args"]), tmp_path / "c")
    for i, task in enumerate(source.tasks()):
        for solve, expected in ((True, 1.0), (False, 0.0)):
            sandbox = backend.start(task, f"{task.name}-{solve}")
            try:
                if solve:  # as Harbor's oracle runs it, then as a policy would
                    sandbox.upload(task.path / "solution", "/solution")
                    command = "bash /solution/solve.sh" if i == 0 else task.config["metadata"]["oracle_command"]
                    out = sandbox.exec(command, timeout=30)
                    assert out.exit_code == 0, out
                result = ScriptVerifier().score(sandbox, task)
            finally:
                sandbox.stop()
            assert (result.reward, result.termination) == (expected, None), result.details
