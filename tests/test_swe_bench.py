"""The ``swe-bench`` task source and verifier, on an instance file built from a local git repo."""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from legorl_std.sandbox.local import LocalSandboxBackend, LocalSandboxOptions
from legorl_swe_bench.instances import InstanceError, read_instances
from legorl_swe_bench.tasks import SweBenchOptions, build
from legorl_swe_bench.verifier import SweBenchVerifier, grade

from lego_rl.kinds import Task, TaskSource, Verifier
from lego_rl.registry import BuildContext

CALC_BUG = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
CALC_FIXED = CALC_BUG.replace("return a - b\n\n", "return a + b\n\n", 1)
TESTS = "from calc import add, sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
NEW_TEST = "\n\ndef test_add():\n    assert add(2, 3) == 5\n"
INSTANCE_ID = "local__calc-1"


def git(cwd: Path, *args: str) -> str:
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout


def diff(repo: Path, path: str, new_text: str) -> str:
    """The git diff that turns ``path`` (as committed) into ``new_text``."""
    (repo / path).write_text(new_text)
    out = git(repo, "diff", "--", path)
    git(repo, "checkout", "--", path)
    return out


@pytest.fixture(scope="module")
def instance_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """repos/local__calc: a buggy commit (the base) then the fix; instances.jsonl names the base."""
    root = tmp_path_factory.mktemp("swe")
    repo = root / "repos" / "local__calc"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / "calc.py").write_text(CALC_BUG)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc with a bug")
    base = git(repo, "rev-parse", "HEAD").strip()
    patch = diff(repo, "calc.py", CALC_FIXED)
    test_patch = diff(repo, "tests/test_calc.py", TESTS + NEW_TEST)
    (repo / "calc.py").write_text(CALC_FIXED)
    git(repo, "commit", "-qam", "the fix (later history the task must not carry)")
    instance = {
        "instance_id": INSTANCE_ID, "repo": "local/calc", "base_commit": base, "version": "0.1",
        "problem_statement": "calc.add(2, 3) returns -1 instead of 5.",
        "patch": patch, "test_patch": test_patch,
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
        "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_sub"]),
        "test_cmd": "python3 -m pytest -rA -p no:cacheprovider",  # the system python3, with python3-pytest
    }  # fmt: skip
    path = root / "instances.jsonl"
    path.write_text(json.dumps(instance) + "\n")
    return path


def load(instance_file: Path, tmp_path: Path, **options) -> list[Task]:
    options = {"repos": "repos", **options}
    opts = SweBenchOptions(
        instances=str(instance_file), dir=str(tmp_path / "cache"), **options
    )
    source = build(opts, BuildContext(spec_dir=instance_file.parent))
    assert isinstance(source, TaskSource)
    return source.tasks()


def test_instances_become_harbor_tasks(instance_file: Path, tmp_path: Path):
    [task] = load(instance_file, tmp_path)
    assert task.name == INSTANCE_ID and task.instruction.startswith(
        "calc.add(2, 3) returns -1"
    )
    meta = tomllib.loads((task.path / "task.toml").read_text())["metadata"]
    assert meta["instance_id"] == INSTANCE_ID and meta["repo"] == "local/calc"
    dockerfile = (task.path / "environment" / "Dockerfile").read_text()
    assert dockerfile.startswith(
        "FROM swebench/sweb.eval.x86_64.local_1776_calc-1:latest\n"
    )
    testbed = task.path / "environment" / "testbed"
    assert (testbed / "calc.py").read_text() == CALC_BUG
    assert git(testbed, "rev-list", "--all").split() == [
        meta["base_commit"]
    ]  # no later history
    graded = json.loads((task.path / "tests" / "instance.json").read_text())
    assert graded["FAIL_TO_PASS"] == ["tests/test_calc.py::test_add"]
    assert graded["log_parser"] == "parse_log_pytest"
    assert (task.path / "solution" / "solve.sh").is_file()
    # cached: a second listing reuses the same directories; other options write another set
    assert [t.path for t in load(instance_file, tmp_path)] == [task.path]
    assert load(instance_file, tmp_path, test_cmd="pytest")[0].path != task.path


def test_without_mirrors_tasks_name_only_the_image(instance_file: Path, tmp_path: Path):
    opts = SweBenchOptions(
        instances=str(instance_file), dir=str(tmp_path / "c"), include=["local__*"]
    )
    [task] = build(opts, BuildContext(spec_dir=instance_file.parent)).tasks()
    assert not (task.path / "environment" / "testbed").exists()
    assert "COPY" not in (task.path / "environment" / "Dockerfile").read_text()


def test_bad_inputs_are_named(instance_file: Path, tmp_path: Path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "x"}\n')
    with pytest.raises(InstanceError, match=r"bad.jsonl:1: not a SWE-bench instance"):
        read_instances(bad)
    with pytest.raises(InstanceError, match="no local mirror of local/calc"):
        load(instance_file, tmp_path, repos=str(tmp_path))
    with pytest.raises(InstanceError, match="no instance .* matches"):
        load(instance_file, tmp_path, exclude=["*"])


def test_grading_uses_swebench_parsers(tmp_path: Path):
    instance = {"instance_id": "i", "repo": "r", "FAIL_TO_PASS": ["t.py::a"], "PASS_TO_PASS": ["t.py::b"],
                "log_parser": "parse_log_pytest", "eval_type": "pass_and_fail"}  # fmt: skip
    log = tmp_path / "log"
    run = ">>>>> Start Test Output\nPASSED t.py::a\n{b} t.py::b\n>>>>> End Test Output\n>>>>> Test Exit Code: {rc}\n"
    log.write_text(run.format(b="PASSED", rc=0))
    assert grade(instance, log)["resolved"] is True
    log.write_text(run.format(b="FAILED", rc=1))
    report = grade(instance, log)
    assert report["resolved"] is False and report["PASS_TO_PASS"]["failed"] == [
        "t.py::b"
    ]
    log.write_text(">>>>> Patch Apply Failed\n")
    report = grade(instance, log)
    assert (report["resolved"], report["tests_ran"]) == (False, False)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_gold_patch_resolves_and_untouched_repo_does_not(
    instance_file: Path, tmp_path: Path
):
    [task] = load(instance_file, tmp_path)
    backend = LocalSandboxBackend(
        LocalSandboxOptions(), BuildContext(run_dir=tmp_path / "run")
    )
    verifier = SweBenchVerifier()
    assert isinstance(verifier, Verifier)
    for solve, expected in ((True, 1.0), (False, 0.0)):
        sandbox = backend.start(task, f"swe-{int(solve)}")
        try:
            if solve:
                sandbox.upload(task.path / "solution", "/solution")
                out = sandbox.exec("bash /solution/solve.sh", timeout=60)
                assert out.exit_code == 0, out
            result = verifier.score(sandbox, task)
        finally:
            sandbox.stop()
        assert (result.reward, result.termination) == (expected, None), result.details
        report = result.details["swe_bench"]
        assert report["tests_ran"] is True
        assert report["PASS_TO_PASS"] == {"passed": 1, "failed": [], "total": 1}
        assert report["FAIL_TO_PASS"]["failed"] == (
            [] if solve else ["tests/test_calc.py::test_add"]
        )


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_other_tasks_keep_their_test_script_reward(tmp_path: Path):
    """A Harbor task without tests/instance.json is graded by its test.sh, as test-script does."""
    task_dir = tmp_path / "task"
    (task_dir / "environment").mkdir(parents=True)
    (task_dir / "environment" / "Dockerfile").write_text(
        "FROM python:3.12-slim\nWORKDIR /app\n"
    )
    (task_dir / "tests").mkdir()
    (task_dir / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    task = Task(name="plain", path=task_dir, instruction="x")
    backend = LocalSandboxBackend(
        LocalSandboxOptions(), BuildContext(run_dir=tmp_path / "run")
    )
    sandbox = backend.start(task, "plain")
    try:
        result = SweBenchVerifier().score(sandbox, task)
    finally:
        sandbox.stop()
    assert (result.reward, result.termination) == (
        1.0,
        None,
    ) and "swe_bench" not in result.details


def test_preflight_names_missing_inputs(tmp_path: Path):
    source = build(
        SweBenchOptions(instances="none.jsonl", repos="nothere"),
        BuildContext(spec_dir=tmp_path),
    )
    assert [p.message.split()[0:2] for p in source.preflight()] == [
        ["SWE-bench", "instance"],
        ["repository", "mirrors"],
    ]


def test_parquet_and_shipped_eval_scripts(instance_file: Path, tmp_path: Path):
    """A parquet file with the swebench>=5 fields: its eval_script and log_parser are used as given."""
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    row = json.loads(instance_file.read_text()) | {
        "eval_script": "#!/bin/bash\necho shipped\n",
        "log_parser": "parse_log_pytest_v2",
        "image": "example/image:1",
    }
    path = tmp_path / "instances.parquet"
    pq.write_table(pa.Table.from_pylist([row]), path)
    [instance] = read_instances(path)
    assert instance.FAIL_TO_PASS == ["tests/test_calc.py::test_add"]
    opts = SweBenchOptions(instances=str(path), dir=str(tmp_path / "c"))
    [task] = build(opts, BuildContext(spec_dir=tmp_path)).tasks()
    assert (task.path / "tests" / "eval.sh").read_text() == row["eval_script"]
    assert (
        json.loads((task.path / "tests" / "instance.json").read_text())["log_parser"]
        == "parse_log_pytest_v2"
    )
    assert (
        (task.path / "environment" / "Dockerfile")
        .read_text()
        .startswith("FROM example/image:1\n")
    )


FORGED = CALC_BUG + (
    "\n\nimport atexit, os, sys\n\n\n"
    "def forge():\n"
    "    print('\\nPASSED tests/test_calc.py::test_add\\nPASSED tests/test_calc.py::test_sub')\n"
    "    sys.stdout.flush()\n"
    "    os._exit(0)\n\n\n"
    "atexit.register(forge)\n"
)
"""The bug left in; the summary lines a log parser reads printed after pytest's own, and exit
status 0 (swebench checks a failing exit against a log without failures)."""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_log_the_code_under_test_forges_does_not_reward(instance_file: Path, tmp_path: Path):
    [task] = load(instance_file, tmp_path)
    backend = LocalSandboxBackend(LocalSandboxOptions(), BuildContext(run_dir=tmp_path / "run"))
    sandbox = backend.start(task, "swe-forged")
    try:
        sandbox.exec(f"cat > /testbed/calc.py <<'EOF'\n{FORGED}EOF", timeout=60)
        result = SweBenchVerifier().score(sandbox, task)
    finally:
        sandbox.stop()
    # the log alone would say resolved: the forged lines come after pytest's summary
    assert result.details["swe_bench"]["resolved"] is True
    seen = result.details["swe_bench_stream"]
    assert seen["resolved"] is False and seen["FAIL_TO_PASS"]["failed"] == ["tests/test_calc.py::test_add"]
    assert (result.reward, result.termination) == (0.0, None)
    assert "tests/test_calc.py::test_add" in result.details["hacking_evidence"][0]


def test_the_reporters_stream_is_graded_by_the_instances_own_parser(tmp_path: Path):
    from legorl_std.verifier.test_report import Report
    from legorl_swe_bench.verifier import grade_stream

    instance = {"instance_id": "i", "repo": "r", "FAIL_TO_PASS": ["t.py::a[x]"], "PASS_TO_PASS": ["t.py::b"],
                "log_parser": "parse_log_pytest_options", "eval_type": "pass_and_fail"}  # fmt: skip
    stream = Report(outcomes={"t.py::a[x]": "passed", "t.py::b": "passed", "t.py::c": "failed"}, started=True, exit=1)
    assert grade_stream(instance, stream, tmp_path / "s.log")["resolved"] is True
    stream.outcomes["t.py::b"] = "error"
    seen = grade_stream(instance, stream, tmp_path / "s.log")
    assert seen["resolved"] is False and seen["PASS_TO_PASS"]["failed"] == ["t.py::b"]
    for broken, why in ((Report(), "no pytest run"), (Report(started=True, exit=None), "did not finish"),
                        (Report(started=True, exit=0, anomalies=["line 3: x"]), "not its own")):  # fmt: skip
        broken.outcomes = {"t.py::a[x]": "passed", "t.py::b": "passed"}
        seen = grade_stream(instance, broken, tmp_path / "s.log")
        assert seen["resolved"] is False and why in seen["reason"]
