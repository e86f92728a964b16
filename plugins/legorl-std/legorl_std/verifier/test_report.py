"""Per-test grading: the result stream of :mod:`legorl_std.verifier.test_reporter`, read and judged.

A task names the tests that must pass in ``[metadata] required_tests``: a list of test ids as
its runner reports them (pytest node ids, unittest ``module.Class.test``), or ``"all"`` (every
reported test, at least ``min_tests``, default 1). A reward of 1 then needs every required test
reported ``passed`` (and no phase of it failed), the runner's ``finish`` line with exit 0, and a
stream without anomalies; a missing or unparsable stream grades 0. What looks forged (lines
that are not events, a second start, events after the finish, events without the start's run
id) is listed as evidence.

``[metadata] allow_other_failures = true`` (with named tests): the runner's exit status need
not be 0, tests outside the list may fail (SWE-bench's rule: only FAIL_TO_PASS and
PASS_TO_PASS count); the runner must still finish.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Any

from lego_rl.kinds import Task

RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
"""Outcomes by severity: a test's outcome is the worst any of its phases reported."""
LISTED = 20


@dataclass
class Report:
    outcomes: dict[str, str] = field(default_factory=dict)
    started: bool = False
    exit: int | None = None
    collect_errors: list[str] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    verifier: dict[str, Any] = field(default_factory=dict)
    """The verifier script's own closing line (what the reward files are), never the tests'."""


@dataclass(frozen=True)
class Requirement:
    tests: tuple[str, ...] | None
    """The named tests; None: every reported test."""
    minimum: int = 1
    other_failures: bool = False
    """Whether tests outside ``tests`` may fail (the runner's exit status is then not read)."""


def requirement(task: Task) -> Requirement | None:
    """The task's ``required_tests`` (None: it grades by its reward file alone)."""
    metadata = task.config.get("metadata", {})
    value = metadata.get("required_tests")
    if value is None:
        return None
    minimum = metadata.get("min_tests", 1)
    if not isinstance(minimum, int) or isinstance(minimum, bool) or minimum < 1:
        raise ValueError(f"task {task.name}: [metadata] min_tests must be a positive integer")
    others = metadata.get("allow_other_failures", False)
    if not isinstance(others, bool):
        raise ValueError(f"task {task.name}: [metadata] allow_other_failures must be true or false")
    if value == "all":
        if others:
            raise ValueError(f'task {task.name}: [metadata] allow_other_failures needs named required_tests, not "all"')
        return Requirement(None, minimum)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f'task {task.name}: [metadata] required_tests must be "all" or a list of test ids')
    return Requirement(tuple(value), len(value), others)


def parse(text: str, verifier_event: str) -> Report:
    """The report in a result stream; ``verifier_event`` names the verifier's own line, which
    only counts as the stream's very last line."""
    report = Report()
    lines = [line for line in text.splitlines() if line.strip()]
    if lines:
        last = _event(lines[-1])
        if last is not None and last.get("event") == verifier_event:
            report.verifier = last
            lines.pop()
    finished, run = False, None
    for number, line in enumerate(lines, 1):
        event = _event(line)
        kind = event.get("event") if event else None
        if event is None or kind not in ("start", "test", "collect_error", "finish"):
            report.anomalies.append(f"line {number} is not a report event: {line[:120]!r}")
            continue
        if finished:
            report.anomalies.append(f"line {number}: a {kind} event after the finish")
            continue
        if kind == "start":
            if report.started:
                report.anomalies.append(f"line {number}: a second start")
                continue
            report.started = True
            run = event.get("run")
            if not isinstance(run, str) or not run:
                report.anomalies.append(f"line {number}: a start without a run id")
            continue
        if not report.started:
            report.anomalies.append(f"line {number}: a {kind} event before the start")
        elif event.get("run") != run:
            report.anomalies.append(f"line {number}: a {kind} event of another run than the start's")
        elif kind == "test":
            _test(report, event, number)
        elif kind == "collect_error":
            report.collect_errors.append(str(event.get("id", "")))
        else:
            finished = True
            report.exit = event.get("exit") if isinstance(event.get("exit"), int) else None
    return report


def grade(report: Report, need: Requirement) -> str:
    """Why the report does not show the required tests passed ('' when it does)."""
    if not report.started:
        return "the test runner reported nothing (no result stream)"
    if report.anomalies:
        return f"the result stream is not the runner's own: {report.anomalies[0]}"
    if report.collect_errors:
        return f"tests could not be collected: {', '.join(report.collect_errors[:LISTED])}"
    if report.exit is None:
        return "the test runner did not finish (killed, or exited early)"
    if report.exit != 0 and not (need.other_failures and need.tests is not None):
        return f"the test runner exited {report.exit}"
    wanted = need.tests if need.tests is not None else tuple(report.outcomes)
    missing = [t for t in wanted if t not in report.outcomes]
    if missing:
        return f"required tests not reported: {', '.join(missing[:LISTED])}"
    failed = [f"{t} ({report.outcomes[t]})" for t in wanted if report.outcomes[t] != "passed"]
    if failed:
        return f"required tests did not pass: {', '.join(failed[:LISTED])}"
    if len(wanted) < need.minimum:
        return f"{len(wanted)} tests reported, the task requires at least {need.minimum}"
    return ""


def summary(report: Report) -> dict[str, Any]:
    """What a trial records of the report."""
    counts: dict[str, int] = {}
    for outcome in report.outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return {
        "tests": counts,
        "exit": report.exit,
        "not_passed": [t for t, o in report.outcomes.items() if o != "passed"][:LISTED],
        "collect_errors": report.collect_errors[:LISTED],
        "anomalies": report.anomalies[:LISTED],
    }


def unittest_ids(source: str, module: str) -> list[str]:
    """The ids unittest gives the tests of a test file's source (``module.Class.test_x``), read
    from its syntax: every ``test*`` method of a class whose bases name ``TestCase``."""
    ids = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and any("TestCase" in ast.unparse(b) for b in node.bases):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test"):
                    ids.append(f"{module}.{node.name}.{item.name}")
    return sorted(ids)


def _test(report: Report, event: dict[str, Any], number: int) -> None:
    test, outcome = event.get("id"), event.get("outcome")
    if not isinstance(test, str) or outcome not in RANK:
        report.anomalies.append(f"line {number}: a test event without an id or a known outcome")
        return
    before = report.outcomes.get(test)
    if before is None or RANK[outcome] > RANK[before]:
        report.outcomes[test] = outcome


def _event(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
