"""Runs a task's tests and reports each one's outcome on the verifier's result stream.

Uploaded into the verification copy (root-owned) and run by a task's ``tests/test.sh`` as
``python3 "$LEGORL_REPORT" pytest ARGS...`` or ``python3 "$LEGORL_REPORT" unittest FILES...``;
it exits as the runner does. A test script that runs pytest its own way (an eval script of
SWE-bench's) loads it as a pytest plugin instead: the verifier also uploads it under a module
name drawn per verification (``$LEGORL_PYTEST_PLUGIN`` in ``$LEGORL_PYTEST_PLUGIN_DIR``, so no
module of the code under test can stand in for it), and the script exports
``PYTHONPATH=$LEGORL_PYTEST_PLUGIN_DIR`` and ``PYTEST_PLUGINS=$LEGORL_PYTEST_PLUGIN``; pytest
imports plugins named there before any conftest, so the stream is taken first there too. Each outcome is one JSON line, written as the test ends to the
descriptor ``$LEGORL_RESULTS_FD`` (which the sandbox opened outside the view: nothing inside
can open it by path) or, where the sandbox offers no such stream, appended to
``$LEGORL_RESULTS_FILE``. The descriptor is taken before any test code is imported and is not
inherited by what the tests start. Lines: ``{"event": "start", "runner": ...}``, one
``{"event": "test", "id": ..., "outcome": passed|failed|error|skipped}`` per test and phase
that reports, ``{"event": "collect_error", "id": ...}``, ``{"event": "finish", "exit": N}``; every line
carries ``"run"``, an id drawn when the reporter starts: a line another process writes on an
inherited copy of the descriptor does not know it.

Self-contained and plain (Python 3.6+, standard library and the runner only): it runs on the
task's own interpreter.
"""

import importlib.util
import json
import os
import sys
import unittest

_stream = None
RUN = os.urandom(8).hex()
"""This reporter's run id, on every line it writes."""
PLUGIN_PREFIX = "legorl_report_"
"""The module name of the reporter loaded as a pytest plugin starts with this."""


def _open_stream():
    fd = os.environ.pop("LEGORL_RESULTS_FD", "")
    if fd.isdigit():
        number = int(fd)
        os.set_inheritable(number, False)
        return number
    path = os.environ.pop("LEGORL_RESULTS_FILE", "")
    if path:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    return None


def emit(**event):
    if _stream is not None:
        event["run"] = RUN
        os.write(_stream, (json.dumps(event, sort_keys=True) + "\n").encode("utf-8"))


class PytestReporter:
    """A pytest plugin object: one line per test phase that is not a passed setup/teardown."""

    def pytest_collectreport(self, report):
        if report.failed:
            emit(event="collect_error", id=report.nodeid)

    def pytest_runtest_logreport(self, report):
        if report.when == "call":
            outcome = report.outcome
            if getattr(report, "wasxfail", None) is not None:
                outcome = "skipped"
        elif report.outcome == "failed":
            outcome = "error"
        elif report.outcome == "skipped":
            outcome = "skipped"
        else:
            return
        emit(event="test", id=report.nodeid, outcome=outcome, when=report.when)


class UnittestResult(unittest.TextTestResult):
    def addSuccess(self, test):
        super().addSuccess(test)
        emit(event="test", id=test.id(), outcome="passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        emit(event="test", id=test.id(), outcome="failed")

    def addError(self, test, err):
        super().addError(test, err)
        emit(event="test", id=test.id(), outcome="error")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        emit(event="test", id=test.id(), outcome="skipped")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        emit(event="test", id=test.id(), outcome="skipped")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        emit(event="test", id=test.id(), outcome="failed")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            emit(event="test", id=test.id(), outcome="failed")


def run_pytest(args):
    import pytest

    return int(pytest.main(args, plugins=[PytestReporter()]))


def run_unittest(files):
    suite = unittest.TestSuite()
    for path in files:
        name = os.path.splitext(os.path.basename(path))[0]
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        except BaseException as exc:  # the code under test broke the import: report, fail
            emit(event="collect_error", id=path, error=type(exc).__name__)
            return 2
        suite.addTests(unittest.defaultTestLoader.loadTestsFromModule(module))
    result = unittest.TextTestRunner(stream=sys.stderr, resultclass=UnittestResult).run(suite)
    return 0 if result.wasSuccessful() and result.testsRun else 1


def main(argv):
    global _stream
    if len(argv) < 1 or argv[0] not in ("pytest", "unittest"):
        sys.stderr.write("usage: report.py pytest ARGS... | report.py unittest FILES...\n")
        return 2
    _stream = _open_stream()
    emit(event="start", runner=argv[0])
    code = run_pytest(argv[1:]) if argv[0] == "pytest" else run_unittest(argv[1:])
    emit(event="finish", exit=code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
elif __name__.startswith(PLUGIN_PREFIX):  # imported by pytest as a plugin (PYTEST_PLUGINS)
    _stream = _open_stream()
    emit(event="start", runner="pytest")
    _plugin = PytestReporter()

    def pytest_collectreport(report):
        _plugin.pytest_collectreport(report)

    def pytest_runtest_logreport(report):
        _plugin.pytest_runtest_logreport(report)

    def pytest_sessionfinish(session, exitstatus):
        emit(event="finish", exit=int(exitstatus))
