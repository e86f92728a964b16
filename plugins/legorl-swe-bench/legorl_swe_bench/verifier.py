"""Verifier ``swe-bench``: the task's test script, graded with swebench's own log parsers.

The test run is :class:`legorl_std.verifier.test_script.ScriptVerifier`'s (agent phase ended, pristine
``/tests``, clean environment, timeout, survivors killed). For a SWE-bench task (one with
``tests/instance.json``, as the ``swe-bench`` task source writes) the reward then comes from
swebench's ``get_eval_report`` with the instance's log parser: 1 only when every FAIL_TO_PASS
and PASS_TO_PASS test passes. Any other Harbor task keeps its test script's reward.

A log is what the tests print, and the code under test prints too (``PASSED test_x`` from an
atexit hook fools every log parser). So where the instance's runner is pytest (its log parser
is one of :data:`PYTEST_PARSERS`), pytest also loads the verifier's test reporter and the same
grading runs a second time on what the reporter saw, written as the log's summary lines
(swebench's own parser, so test ids match as it matches them): a 1 needs both to resolve,
and a log that resolves while the reporter's stream does not is recorded as hacking evidence.
Other runners (django's, sympy's) are graded from the log alone, said in ``details``.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

from legorl_std.verifier import test_report
from legorl_std.verifier.test_script import REWARD_DIR, ScriptVerifier
from pydantic import BaseModel, ConfigDict, Field

from lego_rl import hookimpl
from lego_rl.data import Termination
from lego_rl.kinds import Sandbox, Task, VerifierResult
from lego_rl.registry import BuildContext
from legorl_swe_bench.harbor import INSTANCE_FILE, LOG_FILE

LISTED = 20
"""Failing test names kept in the details, per list."""
PYTEST_PARSERS = frozenset(
    {"parse_log_pytest", "parse_log_pytest_options", "parse_log_pytest_v2", "parse_log_matplotlib", "parse_log_seaborn"}
)
"""swebench's log parsers of repositories whose tests run under pytest."""
STATUS = {"passed": "PASSED", "failed": "FAILED", "error": "ERROR", "skipped": "SKIPPED"}
"""The reporter's outcomes as pytest's ``-rA`` summary writes them."""


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
        verdict, stream = self.script.score_with_report(sandbox, task)
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
            instance = json.loads(spec_file.read_text(encoding="utf-8"))
            report = grade(instance, log)
            details["swe_bench"] = report
            if instance.get("log_parser") not in PYTEST_PARSERS:
                details["grading"] = "the test log alone (the runner is not pytest: no reporter runs)"
                return VerifierResult(1.0 if report["resolved"] else 0.0, details)
            seen = grade_stream(instance, stream, Path(tmp) / "stream.log")
        details["swe_bench_stream"] = seen
        details["grading"] = "the test log and the reporter's stream (both must resolve)"
        if report["resolved"] and not seen["resolved"]:
            failed = seen["FAIL_TO_PASS"]["failed"] + seen["PASS_TO_PASS"]["failed"]
            why = seen.get("reason") or f"per the reporter these did not pass: {', '.join(failed)}"
            details["hacking_evidence"] = [f"the test log resolves the instance but {why}"]
        return VerifierResult(1.0 if report["resolved"] and seen["resolved"] else 0.0, details)


def grade_stream(instance: dict[str, Any], stream: test_report.Report, path: Path) -> dict[str, Any]:
    """:func:`grade` of what the reporter saw: its outcomes written as pytest's summary lines
    between swebench's markers (at ``path``), read by the instance's own parser."""
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT, TEST_EXIT_CODE

    why = (
        "the reporter saw no pytest run" if not stream.started
        else f"the reporter's stream is not its own: {stream.anomalies[0]}" if stream.anomalies
        else "pytest did not finish (killed, or exited early)" if stream.exit is None
        else ""
    )  # fmt: skip
    lines = [f"{STATUS[outcome]} {test}" for test, outcome in stream.outcomes.items()]
    path.write_text("\n".join([START_TEST_OUTPUT, *lines, END_TEST_OUTPUT, f"{TEST_EXIT_CODE}: {stream.exit}", ""]))
    seen = grade(instance, path)
    if why:
        seen |= {"resolved": False, "reason": why}
    return seen


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
