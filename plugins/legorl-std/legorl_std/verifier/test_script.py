"""Verifier ``test-script``: Harbor semantics, binary reward, graded per test.

Ends the sandbox's agent phase where the sandbox has one (:class:`~lego_rl.kinds.PristineVerify`:
agent processes killed, the agent's diff recorded, verification moved to a fresh copy of the
task's image with only the agent's crossing changes applied), uploads the task's pristine
``tests/`` to ``/tests`` and the test reporter (:mod:`legorl_std.verifier.test_reporter`, as
``$LEGORL_REPORT``), runs ``bash /tests/test.sh`` in the workdir under the task's ``[verifier]
timeout_sec`` with a clean environment (a fresh ``HOME``, no user site-packages, the task's
``[verifier] env``), then reads ``/logs/verifier/reward.txt`` (or, only when no
``reward.txt`` exists, ``reward.json`` ``{"reward": x}``): a regular file, 0 or 1, and a 1 only
when test.sh exited 0.

A task that names its tests (``[metadata] required_tests``, see :mod:`legorl_std.verifier.test_report`)
gets a 1 only when its runner reported each of them passed on the result stream, which the
sandbox opens outside the tested code's reach where it can (:class:`~lego_rl.kinds.ResultStream`);
exit status and reward file alone never reward it. A verdict the tests give on the agent's code
(a timeout, no valid reward file, a report that disagrees) is the policy's; a task without a
test script is a ``task_error``. Processes still alive when test.sh ends are killed and counted
in ``details["survivors"]`` for the ``process-reaper`` policy.
"""

from __future__ import annotations

import contextlib
import json
import math
import secrets
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

import legorl_std.verifier.test_reporter as test_reporter
from lego_rl import hookimpl
from lego_rl.crossing import CrossingLimit
from lego_rl.data import Termination
from lego_rl.kinds import RESULTS_FD_ENV, ExecResult, PristineVerify, ResultStream, Sandbox, Task, VerifierResult
from lego_rl.registry import BuildContext
from legorl_std.verifier import test_report

TESTS_DIR = "/tests"
REWARD_DIR = "/logs/verifier"
REPORTER = "/opt/legorl-verifier/report.py"
"""Where the test reporter lies in the verification copy (``$LEGORL_REPORT``)."""
PLUGIN_DIR = "/opt/legorl-verifier/pytest"
"""Where the reporter also lies as a pytest plugin, under a name drawn per verification
(``$LEGORL_PYTEST_PLUGIN_DIR``, ``$LEGORL_PYTEST_PLUGIN``)."""
RESULTS_FILE = f"{REWARD_DIR}/.legorl-results.jsonl"
"""The result stream of a sandbox without :class:`ResultStream` (weaker: a path inside)."""
TAIL = 4000
"""Characters of stdout/stderr kept in the details."""
CLEAN_ENV = {"HOME": "/tmp", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
"""Over the sandbox's own clean env: nothing the agent left in its HOME is read."""
SURVIVORS = "legorl-verifier-survivors:"
REWARD_FILES_EVENT = "legorl_reward_files"
_RUN = (
    r"""rm -f REWARDS/reward.txt REWARDS/reward.json STREAM
emit() { if [ -n "${FD_VAR:-}" ]; then printf '%s\n' "$1" >&"$FD_VAR";
  else printf '%s\n' "$1" >> STREAM; fi; }
bash TESTS/test.sh
rc=$?
left=0
for p in /proc/[0-9]*; do
  n=${p#/proc/}
  [ "$n" = 1 ] || [ "$n" = $$ ] || left=$((left + 1))
done
[ "$left" = 0 ] || { kill -9 -1 2>/dev/null; echo "SURVIVORS $left" >&2; }
kind() { if [ -L "$1" ]; then echo symlink; elif [ -f "$1" ]; then echo file; elif [ -e "$1" ]; then echo other; else echo none; fi; }
emit "{\"event\": \"EVENT\", \"reward.txt\": \"$(kind REWARDS/reward.txt)\", \"reward.json\": \"$(kind REWARDS/reward.json)\"}"
exit $rc
"""
    .replace("REWARDS", REWARD_DIR)
    .replace("STREAM", RESULTS_FILE)
    .replace("FD_VAR", RESULTS_FD_ENV)
    .replace("TESTS", TESTS_DIR)
    .replace("SURVIVORS", SURVIVORS)
    .replace("EVENT", REWARD_FILES_EVENT)
)
"""test.sh; then count and kill what outlived it (in a sandbox with its own PID namespace) and
say, as the stream's last line, what the reward files are (nothing of the tests runs then)."""


class ScriptVerifierOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timeout_sec: float | None = Field(
        default=None, gt=0, description="Override the task's [verifier] timeout_sec."
    )


class ScriptVerifier:
    """Run the task's tests/test.sh; reward from /logs/verifier/reward.txt or reward.json,
    and per test where the task names its tests."""

    def __init__(self, timeout_sec: float | None = None):
        self.timeout_sec = timeout_sec

    def score(self, sandbox: Sandbox, task: Task) -> VerifierResult:
        return self.score_with_report(sandbox, task)[0]

    def score_with_report(self, sandbox: Sandbox, task: Task) -> tuple[VerifierResult, test_report.Report]:
        """:meth:`score` and the result stream's report (empty where test.sh never ran), for a
        verifier that grades the same run its own way (``swe-bench``)."""
        report = test_report.Report()
        tests = task.path / "tests"
        if not (tests / "test.sh").is_file():
            return _failed(f"task {task.name} has no tests/test.sh ({tests})", {}, Termination.TASK_ERROR), report
        try:
            need = test_report.requirement(task)
        except ValueError as exc:
            return _failed(str(exc), {}, Termination.TASK_ERROR), report
        return self._score(sandbox, task, need)

    def _score(
        self, sandbox: Sandbox, task: Task, need: test_report.Requirement | None
    ) -> tuple[VerifierResult, test_report.Report]:
        tests = task.path / "tests"
        report = test_report.Report()
        timeout = self.timeout_sec or task.verifier_timeout
        details: dict[str, Any] = {"pristine": False}
        if isinstance(sandbox, PristineVerify):
            try:
                details |= sandbox.begin_verify(task)
            except CrossingLimit as exc:
                return _failed(str(exc), details, Termination.RESOURCE_LIMIT), report
        sandbox.upload(tests, TESTS_DIR)
        sandbox.upload(Path(test_reporter.__file__), REPORTER)
        plugin = f"{test_reporter.PLUGIN_PREFIX}{secrets.token_hex(8)}"
        sandbox.upload(Path(test_reporter.__file__), f"{PLUGIN_DIR}/{plugin}.py")
        result, stream, details["result_stream"] = _run(sandbox, task, timeout, plugin)
        report = test_report.parse(stream, REWARD_FILES_EVENT)
        details |= {
            "exit_code": result.exit_code,
            "stdout_tail": result.stdout[-TAIL:],
            "stderr_tail": result.stderr[-TAIL:],
            "seconds": round(result.seconds, 3),
            "timeout_sec": timeout,
            "survivors": _survivors(result.stderr),
            "test_report": test_report.summary(report),
        }
        if result.timed_out:
            return _failed(f"tests/test.sh ran past its timeout of {timeout:g}s", details, Termination.VERIFIER_TIMEOUT), report
        reward, source, problem = self._reward_file(sandbox, report.verifier)
        details["reward_source"] = source
        if problem:
            return _failed(problem, details), report
        if reward == 1.0 and result.exit_code != 0:
            return _failed(
                f"{REWARD_DIR}/{source} says 1 but tests/test.sh exited {result.exit_code} "
                "(killed, or failed after writing the reward)",
                details,
            ), report
        if need is None:
            details["grading"] = "reward file (the task names no tests)"
            return VerifierResult(reward, details), report
        why = test_report.grade(report, need)
        details["grading"] = why or "every required test passed"
        if reward == 1.0 and why:
            details["hacking_evidence"] = [f"the reward file says 1 but {why}"]
            return _failed(f"{REWARD_DIR}/{source} says 1 but {why}", details), report
        return VerifierResult(reward, details), report

    @staticmethod
    def _reward_file(sandbox: Sandbox, kinds: dict[str, Any]) -> tuple[float, str, str]:
        """(reward, source, problem) from the reward file the stream's last line describes."""
        if not kinds:
            return 0.0, "", "the verifier script did not finish (no description of the reward files)"
        source = "reward.txt" if kinds.get("reward.txt") != "none" else "reward.json"
        kind = kinds.get(source)
        if kind == "none":
            return 0.0, "", f"tests/test.sh wrote no {REWARD_DIR}/reward.txt or reward.json"
        if kind != "file":
            return 0.0, source, f"{REWARD_DIR}/{source} is not a regular file (a {kind})"
        with tempfile.TemporaryDirectory(prefix="legorl-verifier-") as tmp:
            local = Path(tmp) / "verifier"
            local.mkdir()
            with contextlib.suppress(FileNotFoundError):  # judged below as "no reward file"
                sandbox.download(f"{REWARD_DIR}/{source}", local / source)
            return read_reward(local)


def read_reward(directory: Path) -> tuple[float, str, str]:
    """(reward, source file, problem) from a downloaded /logs/verifier; problem '' when valid.
    Only regular files count, and ``reward.json`` only where there is no ``reward.txt``."""
    txt, js = directory / "reward.txt", directory / "reward.json"
    for path in (txt, js):
        if path.is_symlink() or (path.exists() and not path.is_file()):
            return 0.0, path.name, f"{REWARD_DIR}/{path.name} is not a regular file"
        if path.exists():
            break
    if txt.exists():
        raw: Any = txt.read_text(errors="replace").strip()
        source = "reward.txt"
    elif js.exists():
        source = "reward.json"
        try:
            data = json.loads(js.read_text(errors="replace"))
        except json.JSONDecodeError as exc:
            return 0.0, source, f"{REWARD_DIR}/reward.json is not JSON: {exc}"
        if not isinstance(data, dict) or "reward" not in data:
            return 0.0, source, f'{REWARD_DIR}/reward.json must be {{"reward": 0 or 1}}, got {data!r:.200}'
        raw = data["reward"]
    else:
        return 0.0, "", f"tests/test.sh wrote no {REWARD_DIR}/reward.txt or reward.json"
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(raw, bool) or value not in (0.0, 1.0):
        return 0.0, source, f"reward must be 0 or 1 (binary), got {raw!r:.200} in {REWARD_DIR}/{source}"
    return value, source, ""


def _run(sandbox: Sandbox, task: Task, timeout: float, plugin: str) -> tuple[ExecResult, str, str]:
    """test.sh with the reporter and a result stream: (execution, stream text, stream kind)."""
    env = {**_verifier_env(task), "LEGORL_REPORT": REPORTER,
           "LEGORL_PYTEST_PLUGIN": plugin, "LEGORL_PYTEST_PLUGIN_DIR": PLUGIN_DIR}  # fmt: skip
    if isinstance(sandbox, ResultStream):
        result, stream = sandbox.exec_reporting(_RUN, timeout=timeout, env=env, cwd=sandbox.workdir)
        return result, stream, "descriptor"
    result = sandbox.exec(_RUN, timeout=timeout, env={**env, "LEGORL_RESULTS_FILE": RESULTS_FILE}, cwd=sandbox.workdir)
    with tempfile.TemporaryDirectory(prefix="legorl-verifier-") as tmp:
        local = Path(tmp) / "results.jsonl"
        with contextlib.suppress(Exception):  # noqa: BLE001 - no stream grades as no report
            sandbox.download(RESULTS_FILE, local)
        stream = local.read_text(errors="replace") if local.is_file() else ""
    return result, stream, "file"


def _verifier_env(task: Task) -> dict[str, str]:
    env = task.config.get("verifier", {}).get("env", {})
    declared = {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}
    return {**CLEAN_ENV, **declared}


def _survivors(stderr: str) -> int:
    for line in reversed(stderr.splitlines()):
        if line.startswith(SURVIVORS):
            return int(line.split()[-1])
    return 0


def _failed(
    reason: str, details: dict[str, Any], termination: Termination = Termination.VERIFIER_ERROR
) -> VerifierResult:
    return VerifierResult(0.0, {**details, "reason": reason}, termination)


def build(options: ScriptVerifierOptions, ctx: BuildContext) -> ScriptVerifier:
    """Harbor test script: tests/test.sh writes /logs/verifier/reward.txt (0 or 1)."""
    return ScriptVerifier(options.timeout_sec)


@hookimpl
def legorl_register_verifier(register: Any) -> None:
    register("test-script", build, options=ScriptVerifierOptions)
