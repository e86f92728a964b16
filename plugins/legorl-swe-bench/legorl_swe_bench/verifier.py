"""Verifier ``swe-bench``: the task's test script, graded with swebench's own log parsers.

The test run is :class:`legorl_std.test_script.ScriptVerifier`'s (agent phase ended, pristine
``/tests``, clean environment, timeout, survivors killed). For a SWE-bench task (one with
``tests/instance.json``, as the ``swe-bench`` task source writes) the reward then comes from
the log ``/logs/verifier/test_output.txt``: swebench's ``get_eval_report`` with the instance's
log parser, reward 1 only when every FAIL_TO_PASS and PASS_TO_PASS test passes. Any other
Harbor task keeps its test script's reward.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

from legorl_std.test_script import REWARD_DIR, ScriptVerifier
from pydantic import BaseModel, ConfigDict, Field

from lego_rl import hookimpl
from lego_rl.data import Termination
from lego_rl.kinds import Sandbox, Task, VerifierResult
from lego_rl.registry import BuildContext
from legorl_swe_bench.harbor import INSTANCE_FILE, LOG_FILE

LISTED = 20
"""Failing test names kept in the details, per list."""


class SweBenchVerifierOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timeout_sec: float | None = Field(
        default=None, gt=0, description="Override the task's [verifier] timeout_sec."
    )


class SweBenchVerifier:
    """All FAIL_TO_PASS and PASS_TO_PASS tests pass (swebench's grading) -> 1, else 0."""

    def __init__(self, timeout_sec: float | None = None):
        self.script = ScriptVerifier(timeout_sec)

    def score(self, sandbox: Sandbox, task: Task) -> VerifierResult:
        spec_file = task.path / "tests" / INSTANCE_FILE
        verdict = self.script.score(sandbox, task)
        if (
            not spec_file.is_file()
            or verdict.termination == Termination.VERIFIER_TIMEOUT
        ):
            return verdict
        details = dict(verdict.details)
        details.pop(
            "reason", None
        )  # the test script's own reward.txt is not what is graded here
        with tempfile.TemporaryDirectory(prefix="legorl-swe-bench-") as tmp:
            local = Path(tmp) / "verifier"
            with contextlib.suppress(FileNotFoundError):
                sandbox.download(REWARD_DIR, local)
            log = local / LOG_FILE
            if not log.is_file():
                reason = f"tests/test.sh left no {REWARD_DIR}/{LOG_FILE} to grade"
                return VerifierResult(
                    0.0, {**details, "reason": reason}, Termination.VERIFIER_ERROR
                )
            report = grade(json.loads(spec_file.read_text(encoding="utf-8")), log)
        details["swe_bench"] = report
        return VerifierResult(1.0 if report["resolved"] else 0.0, details)


def grade(instance: dict[str, Any], log: Path) -> dict[str, Any]:
    """swebench's evaluation report of one test log: resolved, and which listed tests failed."""
    from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS
    from swebench.harness.grading import get_eval_report
    from swebench.types import TestSpec

    spec = TestSpec(
        instance_id=instance["instance_id"],
        image=instance.get("image", ""),
        eval_script_list=[],
        repo=instance["repo"],
        version=instance.get("version", ""),
        FAIL_TO_PASS=instance["FAIL_TO_PASS"],
        PASS_TO_PASS=instance["PASS_TO_PASS"],
        log_parser=instance["log_parser"],
        eval_type=instance["eval_type"],
    )
    prediction = {
        "instance_id": spec.instance_id,
        "model_name_or_path": "legorl",
        "model_patch": "",
    }
    report = get_eval_report(spec, prediction, str(log), include_tests_status=True)[
        spec.instance_id
    ]
    status = report.get("tests_status", {})
    out: dict[str, Any] = {
        "resolved": bool(report["resolved"]),
        "tests_ran": bool(report["patch_successfully_applied"]),
    }
    for key in (FAIL_TO_PASS, PASS_TO_PASS):
        lists = status.get(key, {"success": [], "failure": []})
        out[key] = {"passed": len(lists["success"]), "failed": lists["failure"][:LISTED],
                    "total": len(instance[key])}  # fmt: skip
    if report.get("infra_failure_reason"):
        out["infra_failure_reason"] = report["infra_failure_reason"]
    return out


def build(options: SweBenchVerifierOptions, ctx: BuildContext) -> SweBenchVerifier:
    """SWE-bench grading: every FAIL_TO_PASS and PASS_TO_PASS test must pass (swebench's parsers)."""
    return SweBenchVerifier(options.timeout_sec)


@hookimpl
def legorl_register_verifier(register: Any) -> None:
    register("swe-bench", build, options=SweBenchVerifierOptions)
