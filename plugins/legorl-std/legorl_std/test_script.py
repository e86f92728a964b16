"""Verifier ``test-script``: Harbor semantics, binary reward.

Ends the sandbox's agent phase where the sandbox has one (``begin_verify``: agent processes
killed, the agent's diff recorded, ``/logs/verifier`` fresh, ``/tests`` gone), uploads the
task's pristine ``tests/`` to ``/tests``, runs ``bash /tests/test.sh`` in the workdir under
the task's ``[verifier] timeout_sec`` with a clean environment (a fresh ``HOME``, no user
site-packages, the task's ``[verifier] env``), then reads ``/logs/verifier/reward.txt`` (or
``reward.json`` ``{"reward": x}``). The reward must be 0 or 1, and a 1 counts only when
test.sh exited 0; anything else is a verifier error with reward 0. Processes still alive
when test.sh ends (code under test racing the reward file) are killed and counted in
``details["survivors"]`` for the ``process-reaper`` policy.
"""

from __future__ import annotations

import contextlib
import json
import math
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lego_rl import hookimpl
from lego_rl.data import Termination
from lego_rl.kinds import Sandbox, Task, VerifierResult
from lego_rl.registry import BuildContext

TESTS_DIR = "/tests"
REWARD_DIR = "/logs/verifier"
TAIL = 4000
"""Characters of stdout/stderr kept in the details."""
CLEAN_ENV = {"HOME": "/tmp", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
"""Over the sandbox's own clean env: nothing the agent left in its HOME is read."""
SURVIVORS = "legorl-verifier-survivors:"
_RUN = f"""rm -f {REWARD_DIR}/reward.txt {REWARD_DIR}/reward.json
bash {TESTS_DIR}/test.sh
rc=$?
left=0
for p in /proc/[0-9]*; do
  n=${{p#/proc/}}
  [ "$n" = 1 ] || [ "$n" = $$ ] || left=$((left + 1))
done
[ "$left" = 0 ] || {{ kill -9 -1 2>/dev/null; echo "{SURVIVORS} $left" >&2; }}
exit $rc
"""
"""test.sh, then count and kill what outlived it (in a sandbox with its own PID namespace)."""


class ScriptVerifierOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timeout_sec: float | None = Field(
        default=None, gt=0, description="Override the task's [verifier] timeout_sec."
    )


class ScriptVerifier:
    """Run the task's tests/test.sh; reward from /logs/verifier/reward.txt or reward.json."""

    def __init__(self, timeout_sec: float | None = None):
        self.timeout_sec = timeout_sec

    def score(self, sandbox: Sandbox, task: Task) -> VerifierResult:
        tests = task.path / "tests"
        if not (tests / "test.sh").is_file():
            return _error(f"task {task.name} has no tests/test.sh ({tests})", {})
        timeout = self.timeout_sec or task.verifier_timeout
        begin = getattr(sandbox, "begin_verify", None)
        details: dict[str, Any] = dict(begin()) if callable(begin) else {}
        sandbox.upload(tests, TESTS_DIR)
        result = sandbox.exec(_RUN, timeout=timeout, env=_verifier_env(task), cwd=sandbox.workdir)
        survivors = _survivors(result.stderr)
        details |= {
            "exit_code": result.exit_code,
            "stdout_tail": result.stdout[-TAIL:],
            "stderr_tail": result.stderr[-TAIL:],
            "seconds": round(result.seconds, 3),
            "timeout_sec": timeout,
            "survivors": survivors,
        }
        if result.timed_out:
            details["reason"] = f"tests/test.sh ran past its timeout of {timeout:g}s"
            return VerifierResult(0.0, details, Termination.VERIFIER_TIMEOUT)
        with tempfile.TemporaryDirectory(prefix="legorl-verifier-") as tmp:
            local = Path(tmp) / "verifier"
            with contextlib.suppress(FileNotFoundError):  # judged below as "no reward file"
                sandbox.download(REWARD_DIR, local)
            reward, source, problem = read_reward(local)
        details["reward_source"] = source
        if problem:
            return _error(problem, details)
        if reward == 1.0 and result.exit_code != 0:
            return _error(
                f"{REWARD_DIR}/{source} says 1 but tests/test.sh exited {result.exit_code} "
                "(killed, or failed after writing the reward)",
                details,
            )
        return VerifierResult(reward, details)


def read_reward(directory: Path) -> tuple[float, str, str]:
    """(reward, source file, problem) from a downloaded /logs/verifier; problem '' when valid."""
    txt, js = directory / "reward.txt", directory / "reward.json"
    if txt.is_file():
        raw: Any = txt.read_text(errors="replace").strip()
        source = "reward.txt"
    elif js.is_file():
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


def _verifier_env(task: Task) -> dict[str, str]:
    env = task.config.get("verifier", {}).get("env", {})
    declared = {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}
    return {**CLEAN_ENV, **declared}


def _survivors(stderr: str) -> int:
    for line in reversed(stderr.splitlines()):
        if line.startswith(SURVIVORS):
            return int(line.split()[-1])
    return 0


def _error(reason: str, details: dict[str, Any]) -> VerifierResult:
    return VerifierResult(0.0, {**details, "reason": reason}, Termination.VERIFIER_ERROR)


def build(options: ScriptVerifierOptions, ctx: BuildContext) -> ScriptVerifier:
    """Harbor test script: tests/test.sh writes /logs/verifier/reward.txt (0 or 1)."""
    return ScriptVerifier(options.timeout_sec)


@hookimpl
def legorl_register_verifier(register: Any) -> None:
    register("test-script", build, options=ScriptVerifierOptions)
