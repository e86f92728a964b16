"""Reward integrity in the local sandbox: the agent's view holds nothing of the host but what it
is given; verification runs in a fresh copy with only the agent's crossing changes; a reward of 1
needs the named tests reported passed on a stream the tested code cannot open."""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from legorl_std.sandbox.local import LocalSandbox, LocalSandboxBackend, LocalSandboxOptions
from legorl_std.verifier import test_reporter
from legorl_std.verifier.test_report import Requirement, grade, parse, unittest_ids
from legorl_std.verifier.test_script import REWARD_FILES_EVENT, ScriptVerifier

from lego_rl.data import Attribution, Termination, attribute
from lego_rl.kinds import PristineVerify, ResultStream, Task
from lego_rl.registry import BuildContext

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (overlays, per-trial users)"),
]

BUGGY = "def add(a, b):\n    return a - b\n"
TESTS = """import sys
import unittest

sys.path.append("/app")

from calc import add


class AddTest(unittest.TestCase):
    def test_small(self):
        self.assertEqual(add(2, 3), 5)

    def test_zero(self):
        self.assertEqual(add(0, 4), 4)
"""
TEST_SH = """#!/usr/bin/env bash
cd /app
if [ -n "${LEGORL_REPORT:-}" ]; then python3 -I -B "$LEGORL_REPORT" unittest /tests/test_calc.py
else python3 -I -B /tests/test_calc.py; fi && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
"""
FIX = "sed -i 's/a - b/a + b/' calc.py"


def make_task(root: Path, *, required: bool = True) -> Task:
    path = root / "calc-task"
    (path / "environment" / "app").mkdir(parents=True)
    (path / "environment" / "Dockerfile").write_text("FROM python:3.12-slim\nWORKDIR /app\nCOPY app/ /app/\n")
    (path / "environment" / "app" / "calc.py").write_text(BUGGY)
    (path / "environment" / "app" / "notes.md").write_text("notes\n")
    (path / "tests").mkdir()
    (path / "tests" / "test.sh").write_text(TEST_SH)
    (path / "tests" / "test_calc.py").write_text(TESTS)
    metadata = {"required_tests": unittest_ids(TESTS, "test_calc")} if required else {}
    return Task(name="calc", path=path, instruction="fix add", config={"metadata": metadata})


@pytest.fixture
def backend(tmp_path: Path) -> LocalSandboxBackend:
    return LocalSandboxBackend(LocalSandboxOptions(), BuildContext(run_dir=tmp_path / "run"))


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return make_task(tmp_path)


def verify(backend: LocalSandboxBackend, task: Task, agent: str, trial: str = "t"):
    box = backend.start(task, trial)
    try:
        out = box.exec(agent, timeout=60)
        assert out.exit_code == 0, out
        return ScriptVerifier().score(box, task)
    finally:
        box.stop()


# ---------------------------------------------------------------- the agent's view


@pytest.fixture
def markers(backend: LocalSandboxBackend) -> Iterator[list[Path]]:
    """Marker files planted where the host keeps things: the home dir, /tmp, a sibling clone of
    the project, the run dir and the trials root."""
    token = f"legorl-marker-{uuid.uuid4().hex[:8]}"
    checkout = Path(__file__).resolve().parents[1]
    places = [
        Path.home() / token,
        Path("/tmp") / token / "inside",
        checkout.parent / f"{token}-clone" / "solution" / "solve.sh",
        backend.root.parent / token,
        backend.root / token,
    ]
    for path in places:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("the fix: a + b\n")
    yield places
    for path in places:
        path.unlink()
    shutil.rmtree(Path("/tmp") / token)
    shutil.rmtree(checkout.parent / f"{token}-clone")


def test_the_agent_can_neither_list_nor_read_a_marker_outside_the_view(backend, task, markers) -> None:
    box = backend.start(task, "view")
    try:
        token = markers[0].name
        found = box.exec(f"find / -xdev -name '{token}*' 2>/dev/null; true", timeout=120)
        assert found.stdout == "", found
        for path in markers:
            assert box.exec(f"cat {path}", timeout=30).exit_code != 0, path
        listing = box.exec("ls -A /; ls -A /work /root /home 2>&1; cat /proc/self/mountinfo", timeout=30).stdout
        assert "the fix" not in listing
        for secret in (str(backend.root), str(Path(__file__).resolve().parents[1] / "runs"), token):
            assert secret not in listing, secret
        assert box.exec("python3 -c 'print(1)'", timeout=30).stdout == "1\n"  # the base still works
    finally:
        box.stop()


def test_provided_files_show_in_the_agent_phase_only(backend, task, tmp_path) -> None:
    cli = tmp_path / "cli"
    cli.mkdir()
    (cli / "tool").write_text("#!/bin/sh\necho from-the-harness\n")
    (cli / "tool").chmod(0o755)
    box = backend.start(task, "provided")
    try:
        assert box.exec(str(cli / "tool"), timeout=30).exit_code != 0
        box.provide([cli])
        assert box.exec(str(cli / "tool"), timeout=30).stdout == "from-the-harness\n"
        assert box.exec(f"touch {cli}/x", timeout=30).exit_code != 0, "read-only"
        box.begin_verify(task)
        assert box.exec(str(cli / "tool"), timeout=30).exit_code != 0
    finally:
        box.stop()


# ---------------------------------------------------------------- pristine verification


def test_the_oracle_passes_and_the_untouched_copy_fails(backend, task) -> None:
    fixed = verify(backend, task, FIX, "oracle")
    assert (fixed.reward, fixed.termination) == (1.0, None), fixed.details
    assert fixed.details["pristine"] and fixed.details["result_stream"] == "descriptor"
    assert fixed.details["grading"] == "every required test passed"
    assert fixed.details["test_report"]["tests"] == {"passed": 2}
    untouched = verify(backend, task, "true", "nop")
    assert (untouched.reward, untouched.termination) == (0.0, None)
    assert "did not pass" in untouched.details["grading"] or "exited" in untouched.details["grading"]


def test_only_the_crossing_changes_reach_verification(backend, task) -> None:
    agent = (
        f"{FIX}; rm notes.md; echo 'import calc' > conftest.py; printf '[pytest]\\n' > pytest.toml; "
        "echo x > json.py; ln -s /etc/passwd link.py; mkfifo pipe.py; mkdir -p /home/agent/.local; "
        "echo 'def test_x(): pass' > test_calc.py; chmod 444 test_calc.py"
    )
    box = backend.start(task, "crossing")
    try:
        assert box.exec(agent, timeout=60).exit_code == 0
        result = ScriptVerifier().score(box, task)
        present = box.exec("ls -A /app", timeout=30).stdout.split()
    finally:
        box.stop()
    assert result.reward == 1.0, result.details
    assert sorted(present) == ["calc.py"], "only the fix crossed; the deletion too"
    dropped = "\n".join(result.details["crossing"]["dropped_paths"])
    for name, why in [
        ("conftest.py", "configuration"),
        ("pytest.toml", "configuration"),
        ("json.py", "shadows the module 'json'"),
        ("link.py", "a symlink"),
        ("pipe.py", "not a regular file"),
        ("test_calc.py", "a test file"),
    ]:
        assert f"/app/{name}: " in dropped and why in dropped, (name, dropped)
    assert result.details["crossing"]["crossed_paths"] == ["M /app/calc.py", "D /app/notes.md"]


def test_verification_starts_from_the_sealed_starting_state(backend, task) -> None:
    """What the before-agent checks removed (a leftover, a rewritten history) stays removed for
    the tested code, and the agent's change is counted from that state."""
    box = backend.start(task, "sealed")
    try:
        assert box.exec("rm notes.md && echo leftover > /app/old.md", timeout=30).exit_code == 0  # the checks
        box.begin_agent()
        assert box.exec(f"{FIX}; rm old.md", timeout=30).exit_code == 0  # the agent
        assert [c.path for c in box.changes()] == ["/app/calc.py", "/app/old.md"]
        details = box.begin_verify(task)
        present = box.exec("ls -A /app", timeout=30).stdout.split()
    finally:
        box.stop()
    assert present == ["calc.py"], "notes.md stays removed, old.md's removal crossed"
    assert details["crossing"]["crossed_paths"] == ["M /app/calc.py", "D /app/old.md"]


def test_an_agent_that_changes_too_much_ends_as_a_resource_limit(backend, tmp_path) -> None:
    task = make_task(tmp_path)
    task.config["metadata"]["crossing"] = {"max_files": 50}
    result = verify(backend, task, "for i in $(seq 1 60); do echo x > m$i.py; done")
    assert result.termination == Termination.RESOURCE_LIMIT and "60 files" in result.details["reason"]
    assert attribute(result.termination) == Attribution.POLICY


def test_the_local_sandbox_declares_its_verification_capabilities(backend, task) -> None:
    box = backend.start(task, "caps")
    try:
        assert isinstance(box, PristineVerify) and isinstance(box, ResultStream)
        out, stream = box.exec_reporting(
            'echo "{\\"event\\": \\"start\\"}" >&$LEGORL_RESULTS_FD; ls -l /proc/self/fd/$LEGORL_RESULTS_FD >/dev/null;'
            ' cat /proc/self/fd/$LEGORL_RESULTS_FD; echo again > /proc/self/fd/$LEGORL_RESULTS_FD',
            timeout=30,
        )
        assert out.exit_code != 0 and "Permission denied" in out.stderr, "nothing inside opens it by path"
        assert stream == '{"event": "start"}\n'
    finally:
        box.stop()


# ---------------------------------------------------------------- per-test grading


@pytest.mark.parametrize(
    ("code", "expect"),
    [
        ("import os\nos._exit(0)\n", "did not finish"),
        ("import atexit, os\natexit.register(lambda: os._exit(0))\n", "exited 1"),
        ("import sys\nsys.exit(0)\n", "could not be collected"),
        ("import unittest\nunittest.TestCase.run = lambda self, result=None: None\n", "exited 1"),
    ],
    ids=["exit-at-import", "atexit-exit-0", "sys-exit-at-import", "skip-every-test"],
)
def test_exit_status_alone_never_rewards(backend, task, code, expect) -> None:
    agent = f"cat > calc.py <<'EOF'\n{code}\n{BUGGY}EOF"
    result = verify(backend, task, agent)
    assert result.reward == 0.0, result.details
    assert expect in (result.details.get("reason", "") + result.details["grading"]), result.details


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        ("mkdir /logs/verifier/reward.txt", "a directory"),
        ("mkfifo /logs/verifier/reward.txt", "not a regular file"),
        ("ln -s /app/one /logs/verifier/reward.txt", "symlink"),
    ],
)
def test_a_reward_file_that_is_not_a_regular_file_is_the_policys_error(backend, tmp_path, make, kind) -> None:
    """The code under test makes the reward path something else; reward.json (which it wrote)
    must not be read instead."""
    task = make_task(tmp_path, required=False)
    writer = (
        "import json, os\nopen('/app/one', 'w').write('1')\n"
        "json.dump({'reward': 1}, open('/logs/verifier/reward.json', 'w'))\n"
        f"os.system({make!r})\n"
    )
    (task.path / "tests" / "test.sh").write_text(
        "cd /app && python3 -c 'import calc' ; sleep 0.1; true\n"
    )
    result = verify(backend, task, f"cat > calc.py <<'EOF'\n{writer}{BUGGY}EOF")
    assert (result.reward, result.termination) == (0.0, Termination.VERIFIER_ERROR), result.details
    assert "not a regular file" in result.details["reason"]
    assert attribute(result.termination) == Attribution.POLICY


def test_a_task_without_named_tests_says_it_grades_by_its_reward_file(backend, tmp_path) -> None:
    result = verify(backend, make_task(tmp_path, required=False), FIX)
    assert result.reward == 1.0 and result.details["grading"].startswith("reward file")


# ---------------------------------------------------------------- the report and its stream


def test_the_reporter_reports_each_unittest_outcome(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(BUGGY.replace("a - b", "a + b"))
    (tmp_path / "test_calc.py").write_text(
        TESTS.replace('"/app"', repr(str(tmp_path)))
        + "\n    def test_fails(self):\n        self.assertEqual(add(1, 1), 3)\n"
        + "\n    @unittest.skip('no')\n    def test_skipped(self):\n        pass\n"
    )
    read, write = os.pipe()
    import subprocess

    done = subprocess.run(
        [sys.executable, "-I", test_reporter.__file__, "unittest", str(tmp_path / "test_calc.py")],
        env={"LEGORL_RESULTS_FD": str(write), "PATH": os.environ["PATH"]},
        pass_fds=(write,), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    os.close(write)
    with os.fdopen(read) as stream:
        report = parse(stream.read(), REWARD_FILES_EVENT)
    assert done.returncode == 1 and report.exit == 1 and not report.anomalies
    assert report.outcomes == {
        "test_calc.AddTest.test_fails": "failed",
        "test_calc.AddTest.test_skipped": "skipped",
        "test_calc.AddTest.test_small": "passed",
        "test_calc.AddTest.test_zero": "passed",
    }
    assert grade(report, Requirement(("test_calc.AddTest.test_small", "test_calc.AddTest.test_zero"))) == (
        "the test runner exited 1"
    )


def test_a_stream_with_forged_lines_grades_zero() -> None:
    real = [
        {"event": "start", "runner": "unittest", "run": "r1"},
        {"event": "test", "id": "t.A.test_a", "outcome": "passed", "run": "r1"},
        {"event": "finish", "exit": 0, "run": "r1"},
    ]
    text = "".join(json.dumps(e) + "\n" for e in real)
    start, *rest = text.splitlines(keepends=True)
    line = {"event": "test", "id": "t.A.test_a", "outcome": "passed"}
    need = Requirement(("t.A.test_a",))
    assert grade(parse(text, REWARD_FILES_EVENT), need) == ""
    forged = [
        "PASSED everything\n" + text,
        text + json.dumps({"event": "test", "id": "t.A.test_a", "outcome": "passed"}) + "\n",
        json.dumps({"event": "start"}) + "\n" + text,
        text.replace('"passed"', '"failed"', 1) + text,
        # another process on a copy of the descriptor does not know the reporter's run id
        start + json.dumps(line) + "\n" + "".join(rest),
        start + json.dumps({**line, "run": "guess"}) + "\n" + "".join(rest),
        text.replace(', "run": "r1"', "", 1),
    ]
    for stream in forged:
        assert "not the runner's own" in grade(parse(stream, REWARD_FILES_EVENT), need), stream
    assert "reported nothing" in grade(parse("", REWARD_FILES_EVENT), need)
    closing = json.dumps({"event": REWARD_FILES_EVENT, "reward.txt": "file", "reward.json": "none"})
    assert parse(text + closing, REWARD_FILES_EVENT).verifier["reward.txt"] == "file"
    assert "not a report event" in parse(closing + "\n" + text, REWARD_FILES_EVENT).anomalies[0]


def test_a_sandbox_without_capabilities_still_grades_from_a_file(task: Task, tmp_path: Path) -> None:
    """The generic path (no pristine copy, no stream outside the view), through a plain wrapper."""

    class Plain:
        def __init__(self, box: LocalSandbox):
            self.box, self.workdir = box, box.workdir

        def exec(self, command, *, timeout, env=None, cwd=None):
            return self.box.exec(command, timeout=timeout, env=env, cwd=cwd)

        def upload(self, src, dst):
            self.box.upload(src, dst)

        def download(self, src, dst):
            self.box.download(src, dst)

        def endpoint_url(self, host_url):
            return host_url

        def stop(self):
            self.box.stop()

    backend = LocalSandboxBackend(LocalSandboxOptions(), BuildContext(run_dir=tmp_path / "plain"))
    plain = Plain(backend.start(task, "plain"))
    try:
        assert not isinstance(plain, PristineVerify) and not isinstance(plain, ResultStream)
        assert plain.exec(FIX, timeout=30).exit_code == 0
        result = ScriptVerifier().score(plain, task)
    finally:
        plain.stop()
    assert result.reward == 1.0, result.details
    assert (result.details["pristine"], result.details["result_stream"]) == (False, "file")


def test_other_failures_are_allowed_only_when_the_task_says_so(tmp_path: Path) -> None:
    from legorl_std.verifier.test_report import requirement

    run = [{"event": "start", "runner": "pytest", "run": "r"},
           {"event": "test", "id": "t.py::a", "outcome": "passed", "run": "r"},
           {"event": "test", "id": "t.py::other", "outcome": "failed", "run": "r"},
           {"event": "finish", "exit": 1, "run": "r"}]  # fmt: skip
    report = parse("".join(json.dumps(e) + "\n" for e in run), REWARD_FILES_EVENT)

    def need(**metadata: object) -> Requirement | None:
        return requirement(Task(name="t", path=tmp_path, instruction="", config={"metadata": metadata}))

    assert grade(report, need(required_tests=["t.py::a"])) == "the test runner exited 1"
    assert grade(report, need(required_tests=["t.py::a"], allow_other_failures=True)) == ""
    assert "did not pass" in grade(report, need(required_tests=["t.py::other"], allow_other_failures=True))
    report.exit = None  # the runner must still finish
    assert "did not finish" in grade(report, need(required_tests=["t.py::a"], allow_other_failures=True))
    for bad in ({"required_tests": "all", "allow_other_failures": True}, {"required_tests": ["x"], "allow_other_failures": "yes"}):
        with pytest.raises(ValueError, match="allow_other_failures"):
            need(**bad)


def test_the_reporter_as_a_pytest_plugin_takes_the_stream_first(tmp_path: Path) -> None:
    """Loaded through PYTEST_PLUGINS under a drawn name: the stream is taken before a conftest
    runs (whose code cannot find it), each test reported with the run id, the finish with
    pytest's exit status."""
    import subprocess

    plugins = tmp_path / "plugins"
    plugins.mkdir()
    shutil.copyfile(test_reporter.__file__, plugins / "legorl_report_abc123.py")
    (tmp_path / "conftest.py").write_text(
        "import os\nFOUND = os.environ.get('LEGORL_RESULTS_FD')\n"
    )
    (tmp_path / "test_x.py").write_text(
        "import conftest\n\ndef test_fd_hidden():\n    assert conftest.FOUND is None\n\n"
        "def test_fails():\n    assert False\n"
    )
    read, write = os.pipe()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly", str(tmp_path)],
        cwd=tmp_path, pass_fds=(write,), capture_output=True, text=True, timeout=300,
        env={"PATH": os.environ["PATH"], "LEGORL_RESULTS_FD": str(write), "PYTHONPATH": str(plugins),
             "PYTEST_PLUGINS": "legorl_report_abc123"},
    )  # fmt: skip
    os.close(write)
    with os.fdopen(read) as stream:
        report = parse(stream.read(), REWARD_FILES_EVENT)
    assert done.returncode == 1 and not report.anomalies, (done.stdout[-2000:], report.anomalies)
    assert report.exit == 1
    assert report.outcomes == {"test_x.py::test_fd_hidden": "passed", "test_x.py::test_fails": "failed"}
