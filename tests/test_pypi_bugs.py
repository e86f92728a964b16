"""The ``pypi-bugs`` task source: real bugs of PyPI projects (tasks/pypi-bugs), each a SWE-style
task whose repository holds no trace of upstream's fix, graded by the ``swe-bench`` verifier.

Every shipped bug is checked through the real pipeline's parts (the local sandbox, the
verifier's pristine copy and test reporter): its oracle (upstream's fix) earns 1; doing nothing
earns 0 with every FAIL_TO_PASS test failing and every PASS_TO_PASS test passing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from legorl_swe_bench.instances import InstanceError
from legorl_swe_bench.pypi_bugs import PypiBugsOptions, bug_dirs, build, read_bug
from unidiff import PatchSet

from lego_rl.engine.task_check import check_tasks
from lego_rl.kinds import Task
from lego_rl.registry import BuildContext, default_registry
from lego_rl.spec.resolve import load_and_resolve

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "tasks" / "pypi-bugs"
SPEC = REPO / "specs" / "claude-code-docker-local.yaml"
BUGS = [d.name for d in bug_dirs(SHIPPED)]
LICENSES = ("LICENSE", "LICENCE", "COPYING")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Task]:
    cache = tmp_path_factory.mktemp("pypi-bugs")
    source = build(PypiBugsOptions(bugs=str(SHIPPED), dir=str(cache)), BuildContext(spec_dir=REPO))
    assert source.preflight() == []
    return {task.name: task for task in source.tasks()}


def test_at_least_ten_real_bugs_of_five_projects_are_shipped():
    projects = {read_bug(SHIPPED / name).bug.project for name in BUGS}
    assert len(BUGS) >= 10 and len(projects) >= 5, (BUGS, projects)
    readme = (SHIPPED / "README.md").read_text()
    assert all(f"`{name}`" in readme for name in BUGS), "tasks/pypi-bugs/README.md lists every bug"


@pytest.mark.parametrize("name", BUGS)
def test_a_shipped_bug_is_small_licensed_and_its_patches_keep_to_their_side(name: str):
    bug = read_bug(SHIPPED / name)
    repo = bug.path / "repo"
    files = [p for p in repo.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 400_000, "repo/ is trimmed"
    assert any(p.name.upper().startswith(LICENSES) for p in repo.iterdir()), "the project's license file is kept"
    assert not [p for p in files if p.suffix == ".pyc" or {".git", "__pycache__"} & set(p.parts)]
    assert bug.bug.fixed_version != bug.bug.buggy_version and bug.bug.upstream_record
    fix, tests = PatchSet(bug.fix), PatchSet(bug.tests)
    assert fix and not [f.path for f in fix if _is_test(f.path)], "fix.patch changes source only"
    assert tests and all(_is_test(f.path) for f in tests), "test.patch changes tests only"
    named = {t.split("::")[0] for t in bug.bug.fail_to_pass + bug.bug.pass_to_pass}
    assert named <= {f.path for f in tests if not f.is_removed_file}, "graded tests are in the files test.patch runs"


def _is_test(path: str) -> bool:
    return any(part == "tests" or part.startswith("test_") or part == "conftest.py" for part in Path(path).parts)


def test_the_tasks_repository_is_the_buggy_release_alone(tasks: dict[str, Task]):
    """One commit, the buggy release's files; upstream's fix is the mirror's next commit, and no
    object of it reaches the task's repository."""
    for name, task in tasks.items():
        testbed = task.path / "environment" / "testbed"
        assert git(testbed, "rev-list", "--all", "--count") == "1", name
        fixed = git(task.path.parent / "mirrors" / f"{name}.git", "rev-parse", "main")
        objects = git(testbed, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
        assert fixed not in objects.split(), name
        meta = task.config["metadata"]
        assert meta["source"] == "pypi-bugs" and meta["base_commit"] == git(testbed, "rev-parse", "HEAD")
        assert (task.path / "solution" / "solve.sh").is_file() and "/testbed" in task.instruction


def test_the_same_bugs_give_the_same_commits_on_every_build(tasks: dict[str, Task], tmp_path: Path):
    again = build(PypiBugsOptions(bugs=str(SHIPPED), dir=str(tmp_path), include=BUGS[:2]), BuildContext(spec_dir=REPO))
    for task in again.tasks():
        assert task.config["metadata"]["base_commit"] == tasks[task.name].config["metadata"]["base_commit"]


def test_bad_bug_directories_are_named(tmp_path: Path):
    bug = tmp_path / "bugs" / "demo-1.0"
    shutil.copytree(SHIPPED / BUGS[0], bug)
    (bug / "fix.patch").unlink()
    with pytest.raises(InstanceError, match=r"demo-1.0: no fix.patch"):
        read_bug(bug)
    shutil.copy(SHIPPED / BUGS[0] / "fix.patch", bug / "fix.patch")
    toml = (bug / "bug.toml").read_text()
    (bug / "bug.toml").write_text(re.sub(r"(?m)^test_cmd = .*$", 'test_cmd = "PYTHONPATH=src python3 -m pytest"', toml))
    with pytest.raises(InstanceError, match=r"(?s)bug.toml.*keeping \$PYTHONPATH"):
        read_bug(bug)
    (bug / "bug.toml").write_text(toml.replace("fail_to_pass = [", 'fail_to_pass = ["tests/t.py::t[a b]", ', 1))
    with pytest.raises(InstanceError, match=r"white space"):
        read_bug(bug)
    source = build(PypiBugsOptions(bugs=str(tmp_path / "none")), BuildContext(spec_dir=tmp_path))
    assert "does not exist" in source.preflight()[0].message
    with pytest.raises(InstanceError, match=r"no bug under .* matches"):
        build(PypiBugsOptions(bugs=str(SHIPPED), include=["nothing-*"]), BuildContext(spec_dir=REPO)).tasks()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_every_shipped_bug_rewards_its_fix_and_not_the_untouched_repository(tmp_path: Path):
    """`legorl check-tasks`' engine on the headline container spec's blocks, in the local
    sandbox: six anti-cheat policies, pristine verification, per-test grading."""
    registry = default_registry()
    resolved = load_and_resolve(SPEC, registry, ["sandbox.plugin=local", "sandbox.options={}"])
    checks = check_tasks(resolved, registry, SPEC, run_dir=tmp_path / "check")
    assert sorted(c.task for c in checks) == BUGS
    for check in checks:
        assert check.ok, (check.task, check.problems)
        assert check.oracle is not None
        bug = read_bug(SHIPPED / check.task).bug
        p2p = {"passed": len(bug.pass_to_pass), "failed": [], "total": len(bug.pass_to_pass)}
        oracle, noop = check.oracle.verifier, check.noop.verifier
        assert oracle["swe_bench"]["PASS_TO_PASS"] == noop["swe_bench"]["PASS_TO_PASS"] == p2p, check.task
        assert oracle["swe_bench_stream"]["resolved"], check.task  # the reporter saw every test pass too
        assert noop["swe_bench"]["FAIL_TO_PASS"]["passed"] == 0, (check.task, noop["swe_bench"])
