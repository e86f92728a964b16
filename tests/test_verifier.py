"""The ``test-script`` verifier, on the shipped tasks and on synthetic ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import legorl_std.verifier.test_script as test_script
import pytest
from legorl_std.sandbox.local import LocalSandboxBackend, LocalSandboxOptions
from legorl_std.tasks.harbor_dir import HarborDirTasks
from legorl_std.verifier.test_script import ScriptVerifier, read_reward

from lego_rl.data import Termination
from lego_rl.kinds import Task, Verifier
from lego_rl.registry import BuildContext, Registry

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

QUICKSTART = Path(__file__).resolve().parents[1] / "tasks" / "quickstart"
SHIPPED = {t.name: t for t in HarborDirTasks(QUICKSTART).tasks()}


@pytest.fixture
def backend(tmp_path: Path) -> LocalSandboxBackend:
    return LocalSandboxBackend(LocalSandboxOptions(), BuildContext(run_dir=tmp_path / "run"))


def make_task(root: Path, test_sh: str, config: dict | None = None) -> Task:
    task = root / "task"
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM python:3.12-slim\nWORKDIR /app\n")
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text(test_sh)
    return Task(name="synthetic", path=task, instruction="x", config=config or {})


def score(
    backend: LocalSandboxBackend, task: Task, before: str = "", **options
) -> test_script.VerifierResult:
    sandbox = backend.start(task, "trial")
    try:
        if before:
            assert sandbox.exec(before, timeout=30).exit_code == 0
        return ScriptVerifier(**options).score(sandbox, task)
    finally:
        sandbox.stop()


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_oracle_passes_and_the_untouched_repo_fails(backend: LocalSandboxBackend, name: str):
    task = SHIPPED[name]
    verifier = ScriptVerifier()
    assert isinstance(verifier, Verifier)
    for solve, expected in ((True, 1.0), (False, 0.0)):
        sandbox = backend.start(task, f"{name}-{solve}")
        try:
            if solve:
                sandbox.upload(task.path / "solution", "/solution")
                out = sandbox.exec("bash /solution/solve.sh", timeout=30)
                assert out.exit_code == 0, out
            result = verifier.score(sandbox, task)
        finally:
            sandbox.stop()
        assert (result.reward, result.termination) == (expected, None), result.details
        assert result.details["reward_source"] == "reward.txt"
        assert result.details["exit_code"] == (0 if solve else 1)


def test_timeout_is_a_verifier_timeout(backend, tmp_path: Path):
    task = make_task(
        tmp_path, "sleep 30\necho 1 > /logs/verifier/reward.txt\n", {"verifier": {"timeout_sec": 60}}
    )
    result = score(backend, task, timeout_sec=1)
    assert (result.reward, result.termination) == (0.0, Termination.VERIFIER_TIMEOUT)
    assert result.details["timeout_sec"] == 1 and "timeout" in result.details["reason"]


@pytest.mark.parametrize(
    ("test_sh", "reward", "termination", "reason"),
    [
        ("echo '{\"reward\": 1}' > /logs/verifier/reward.json", 1.0, None, None),
        ("echo 0.5 > /logs/verifier/reward.txt", 0.0, Termination.VERIFIER_ERROR, "must be 0 or 1"),
        ("echo 1 > /dev/null", 0.0, Termination.VERIFIER_ERROR, "wrote no /logs/verifier/reward.txt"),
    ],
)
def test_reward_file_rules(backend, tmp_path, test_sh, reward, termination, reason):
    result = score(backend, make_task(tmp_path, test_sh + "\n"))
    assert (result.reward, result.termination) == (reward, termination)
    if reason:
        assert reason in result.details["reason"]


def test_a_reward_planted_by_the_agent_does_not_count(backend, tmp_path):
    task = make_task(tmp_path, "exit 0\n")
    result = score(backend, task, before="echo 1 > /logs/verifier/reward.txt")
    assert (result.reward, result.termination) == (0.0, Termination.VERIFIER_ERROR)


def test_task_verifier_env_and_workdir(backend, tmp_path):
    task = make_task(
        tmp_path,
        '[ "$PWD" = /app ] && [ "$TOKEN" = abc ] && echo 1 > /logs/verifier/reward.txt\n',
        {"verifier": {"env": {"TOKEN": "abc"}}},
    )
    assert score(backend, task).reward == 1.0


def test_missing_test_script(backend, tmp_path):
    task = make_task(tmp_path, "")
    (task.path / "tests" / "test.sh").unlink()
    result = score(backend, task)
    assert (
        result.termination == Termination.TASK_ERROR and "no tests/test.sh" in result.details["reason"]
    )


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"reward.txt": "1\n"}, (1.0, "reward.txt", "")),
        ({"reward.txt": "0"}, (0.0, "reward.txt", "")),
        ({"reward.txt": "1", "reward.json": '{"reward": 0}'}, (1.0, "reward.txt", "")),
        ({"reward.json": json.dumps({"reward": 0.0, "extra": 3})}, (0.0, "reward.json", "")),
        ({"reward.json": '{"reward": true}'}, (0.0, "reward.json", "must be 0 or 1")),
        ({"reward.json": '{"score": 1}'}, (0.0, "reward.json", "must be {")),
        ({"reward.json": "nope"}, (0.0, "reward.json", "not JSON")),
        ({"reward.txt": "pass"}, (0.0, "reward.txt", "must be 0 or 1")),
    ],
)
def test_read_reward(tmp_path: Path, files: dict[str, str], expected):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    reward, source, problem = read_reward(tmp_path)
    assert (reward, source) == expected[:2]
    assert expected[2] in problem and bool(problem) == bool(expected[2])


def test_registered_with_forbidding_options():
    registry = Registry()
    registry.add_module(test_script, name="test-script-under-test")
    assert registry.build("verifier", "test-script", {"timeout_sec": 5}).timeout_sec == 5
    with pytest.raises(Exception, match="extra"):
        registry.build("verifier", "test-script", {"timeout": 5})


# ---------------------------------------------------------------- integrity (issue 4)


def test_reward_one_counts_only_when_test_sh_exits_zero(backend, tmp_path):
    task = make_task(tmp_path, "echo 1 > /logs/verifier/reward.txt\nexit 3\n")
    result = score(backend, task)
    assert (result.reward, result.termination) == (0.0, Termination.VERIFIER_ERROR)
    assert "exited 3" in result.details["reason"]


def test_processes_outliving_test_sh_are_killed_and_counted(backend, tmp_path):
    task = make_task(tmp_path, "(sleep 30 &) ; echo 0 > /logs/verifier/reward.txt\n")
    result = score(backend, task)
    assert result.details["survivors"] == 1 and result.reward == 0.0 and result.details["seconds"] < 20


def test_the_verifier_ignores_what_the_agent_left_in_its_home(backend, tmp_path):
    check = (
        '[ "$HOME" = /tmp ] && [ "$PYTHONNOUSERSITE" = 1 ] && [ -z "${PYTHONPATH:-}" ] '
        "&& python3 -c 'import sys; assert \"planted\" not in sys.modules' "
        "&& echo 1 > /logs/verifier/reward.txt\n"
    )
    plant = (
        "d=$(python3 -c 'import site; print(site.getusersitepackages())'); mkdir -p $d && "
        "echo 'import planted' > $d/x.pth && echo 'print(1)' > $d/planted.py && "
        "echo 'export PYTHONPATH=/app' >> $HOME/.bashrc"
    )
    result = score(backend, make_task(tmp_path, check), before=plant)
    assert result.reward == 1.0, result.details
