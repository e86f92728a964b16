"""Verifier ``test-script``: Harbor semantics, binary reward.

Uploads the task's ``tests/`` to ``/tests``, runs ``bash /tests/test.sh`` in the workdir
under the task's ``[verifier] timeout_sec`` with its ``[verifier] env``, then reads
``/logs/verifier/reward.txt`` (or ``reward.json`` ``{"reward": x}``). The reward must be 0
or 1; anything else is a verifier error with reward 0.
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
        sandbox.upload(tests, TESTS_DIR)
        # A reward file left by the agent must not count: clear it before the tests run.
        command = f"rm -f {REWARD_DIR}/reward.txt {REWARD_DIR}/reward.json; bash {TESTS_DIR}/test.sh"
        result = sandbox.exec(command, timeout=timeout, env=_verifier_env(task), cwd=sandbox.workdir)
        details: dict[str, Any] = {
            "exit_code": result.exit_code,
            "stdout_tail": result.stdout[-TAIL:],
            "stderr_tail": result.stderr[-TAIL:],
            "seconds": round(result.seconds, 3),
            "timeout_sec": timeout,
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
    return {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}


def _error(reason: str, details: dict[str, Any]) -> VerifierResult:
    return VerifierResult(0.0, {**details, "reason": reason}, Termination.VERIFIER_ERROR)


def build(options: ScriptVerifierOptions, ctx: BuildContext) -> ScriptVerifier:
    """Harbor test script: tests/test.sh writes /logs/verifier/reward.txt (0 or 1)."""
    return ScriptVerifier(options.timeout_sec)


@hookimpl
def legorl_register_verifier(register: Any) -> None:
    register("test-script", build, options=ScriptVerifierOptions)
