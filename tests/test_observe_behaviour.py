"""Behaviour analytics: shell command reading, harness vocabularies, recorded transcripts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lego_rl.observe.behaviour import ToolCall, step_behaviour, tool_calls, trial_behaviour
from lego_rl.observe.shell_commands import classify_shell

RECORDED = json.loads(
    (Path(__file__).parent / "fixtures" / "mini-swe-agent-transcripts.json").read_text()
)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat /app/calc.py", [("inspect", ["/app/calc.py"])]),
        ("nl -ba grades.py | sed -n '10,20p'", [("inspect", ["grades.py"])]),
        ("sed -i 's/>/>=/' ./grades.py", [("edit", ["grades.py"])]),
        (
            "grep -n passed grades.py tests/test_grades.py",
            [("inspect", ["grades.py", "tests/test_grades.py"])],
        ),
        (
            "cat <<'EOF' > fix.py\nx = '>'\nEOF\npython fix.py",
            [("edit", ["fix.py"]), ("run", ["fix.py"])],
        ),
        ("cd /app && python -m pytest -q 2>&1 | tail", [("test", [])]),
        ("bash tests/test.sh", [("test", [])]),
        ("echo done > out.txt 2>/dev/null", [("edit", ["out.txt"])]),
        ("ls -la", [("other", [])]),
    ],
)
def test_shell_commands_are_read_as_actions(command: str, expected: list) -> None:
    assert [(a.kind, a.files) for a in classify_shell(command)] == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "careful",
            {
                "edited": True,
                "files_before_edit": 1,
                "verified_after_edit": True,
                "tests_after_change": False,
            },
        ),
        (
            "blind",
            {
                "edited": True,
                "files_before_edit": 0,
                "verified_after_edit": False,
                "tests_after_change": False,
            },
        ),
        (
            "explore-only",
            {
                "edited": False,
                "files_before_edit": 1,
                "verified_after_edit": None,
                "tests_after_change": None,
            },
        ),
        (
            "rewrite-then-test",
            {
                "edited": True,
                "files_before_edit": 1,
                "verified_after_edit": True,
                "tests_after_change": True,
            },
        ),
    ],
)
def test_recorded_mini_swe_agent_trajectories(name: str, expected: dict) -> None:
    calls = tool_calls({"harness": {"transcript": RECORDED[name]}})
    assert calls and all(c.name == "bash" for c in calls)
    assert calls[-1].arguments["command"] == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    got = trial_behaviour(calls, "mini-swe-agent")
    assert {k: got[k] for k in expected} == expected


def test_claude_code_vocabulary() -> None:
    calls = [
        ToolCall("Read", {"file_path": "/repo/a.py"}),
        ToolCall("Grep", {"pattern": "def f", "path": "/repo/b.py"}),
        ToolCall("Read", {"file_path": "/repo/a.py"}),
        ToolCall("Edit", {"file_path": "/repo/a.py", "old_string": "x", "new_string": "y"}),
        ToolCall("Bash", {"command": "python /repo/a.py"}),
    ]
    got = trial_behaviour(calls, "claude-code")
    assert got["files_before_edit"] == 2 and got["verified_after_edit"] is True
    assert got["tests_after_change"] is False


def test_codex_vocabulary_reads_exec_command_and_apply_patch() -> None:
    patch = "*** Begin Patch\n*** Update File: src/calc.py\n@@\n-a - b\n+a + b\n*** End Patch"
    listed = [
        {"name": "exec_command", "arguments": json.dumps({"cmd": "cat src/calc.py"})},
        {"name": "apply_patch", "arguments": {"input": patch}},
        {"name": "exec_command", "arguments": json.dumps({"cmd": "pytest -q"})},
    ]
    calls = tool_calls({"harness": {"tool_calls": listed}})
    got = trial_behaviour(calls, "codex")
    assert got == {
        "tool_calls": 3, "edited": True, "files_before_edit": 1,
        "verified_after_edit": True, "tests_after_change": True, "failed_test_run": None,
        "after_failed_test": None, "reward": None,
    }  # fmt: skip


def test_an_edit_after_the_tests_is_not_verified() -> None:
    calls = [
        ToolCall("bash", {"command": c})
        for c in ("sed -i s/a/b/ x.py", "pytest", "sed -i s/b/c/ x.py")
    ]
    got = trial_behaviour(calls, "mini-swe-agent")
    assert got["verified_after_edit"] is False and got["tests_after_change"] is True


def test_proxy_tool_calls_are_used_when_the_harness_lists_none() -> None:
    records = [
        {"tool_calls": [{"function": {"name": "bash", "arguments": '{"command": "cat a.py"}'}}]}
    ]
    assert tool_calls({"harness": {}}, records) == [ToolCall("bash", {"command": "cat a.py"})]


def test_step_aggregate_divides_by_editing_trials() -> None:
    per_trial = [
        trial_behaviour(tool_calls({"harness": {"transcript": RECORDED[n]}}), "mini-swe-agent")
        for n in ("careful", "blind", "explore-only", "rewrite-then-test")
    ]
    step = step_behaviour(per_trial)
    assert step["edit_share"] == 0.75
    assert step["verified_after_edit"] == pytest.approx(2 / 3)
    assert step["tests_after_change"] == pytest.approx(1 / 3)
    assert step["files_before_edit"] == 0.75
    assert step_behaviour([])["verified_after_edit"] is None


def test_claude_code_and_codex_transcripts_as_their_plugins_render_them() -> None:
    claude = (
        '[assistant]\nLooking.\n\n[tool Read] {"file_path": "/app/calc.py"}\n\n[tool result]\ndef add\n\n'
        '[tool Edit] {"file_path": "/app/calc.py", "old_string": "-", "new_string": "+"}\n\n'
        "$ cd /app && python -m pytest -q\n\n[tool result]\n1 passed\n\n[result] success"
    )
    got = trial_behaviour(
        tool_calls({"harness": {"transcript": claude}}, (), "claude-code"), "claude-code"
    )
    assert got["tool_calls"] == 3 and got["files_before_edit"] == 1
    assert got["verified_after_edit"] is True and got["tests_after_change"] is True
    codex = (
        "[assistant]\nok\n\n$ bash -lc 'cat calc.py'\ndef add(a, b):\n    return a - b\n\n"
        '[file change] [{"path": "calc.py", "kind": "update"}]\n\n$ bash -lc pytest\n1 passed'
    )
    calls = tool_calls({"harness": {"transcript": codex}}, (), "codex")
    assert [c.arguments.get("command") for c in calls] == [
        "bash -lc 'cat calc.py'",
        None,
        "bash -lc pytest",
    ]
    got = trial_behaviour(calls, "codex")
    assert got["files_before_edit"] == 1 and got["tests_after_change"] is True


def test_codex_command_events_give_exit_codes_and_the_correction_rate() -> None:
    """Codex's own command events (``/bin/bash -lc '...'``, its exit_code) as the plugin lists
    them: a wrong edit, a failed test run, the other edit, a passing run; the step's correction
    rate is the share rewarded of the trials that saw a test run fail."""
    from legorl_codex.outcome import tool_calls as codex_tool_calls

    def item(command: str, code: int) -> dict:
        return {"type": "command_execution", "command": f"/bin/bash -lc '{command}'", "exit_code": code}

    corrected = codex_tool_calls([
        item("sed -i \"7s|.*|    return a - b|\" /app/calc.py", 0),
        item("python3 /app/run_tests.py", 1),
        item("sed -i \"7s|.*|    return a + b|\" /app/calc.py", 0),
        item("python3 /app/run_tests.py", 0),
    ])  # fmt: skip
    blind = codex_tool_calls([item("sed -i \"7s|.*|    return a - b|\" /app/calc.py", 0)])
    gave_up = codex_tool_calls([item("sed -i \"7s|.*|    return a - b|\" /app/calc.py", 0), item("python3 /app/run_tests.py", 1)])
    trials = [
        trial_behaviour(tool_calls({"harness": {"tool_calls": calls}}), "codex", reward)
        for calls, reward in ((corrected, 1.0), (blind, 0.0), (gave_up, 0.0))
    ]
    assert [t["verified_after_edit"] for t in trials] == [True, False, True]
    assert [t["tests_after_change"] for t in trials] == [True, False, True]
    assert [t["failed_test_run"] for t in trials] == [True, None, True]
    step = step_behaviour(trials)
    assert step["correction_rate"] == 0.5 and step["verified_after_edit"] == pytest.approx(2 / 3)
    assert step_behaviour(trials[1:2])["correction_rate"] is None
    assert [t["after_failed_test"] for t in trials] == ["changed", None, "stopped"]
    assert (step["after_failure_changed"], step["after_failure_stopped"], step["after_failure_repeated"]) == (0.5, 0.5, 0)
    assert step_behaviour(trials[1:2])["after_failure_changed"] is None


def test_after_a_failed_test_run_a_trial_changes_repeats_or_stops() -> None:
    """The first failed run decides; an edit in the same command as the failing run counts as
    made before it; only an edit that follows the failure is the trial's next move."""

    def run(*steps: tuple[str, int]) -> str | None:
        return trial_behaviour([ToolCall("bash", {"command": c}, code) for c, code in steps], "mini-swe-agent")[
            "after_failed_test"
        ]

    one, two = "sed -i -E -f /app/fixes/1.sed /app/*.py", "sed -i -E -f /app/fixes/2.sed /app/*.py"
    tests = "python3 /app/tests/run_tests.py"
    assert run((one, 0), (tests, 1), (two, 0), (tests, 0)) == "changed"
    assert run((one, 0), (tests, 1), (one, 0), (tests, 1)) == "repeated"
    assert run((f"{one} && {tests}", 1), (f"{one} && {tests}", 1)) == "repeated"
    assert run((f"{one} && {tests}", 1), (f"{two} && {tests}", 0)) == "changed"
    assert run((one, 0), (tests, 1), ("cat /app/calc.py", 0)) == "stopped"
    assert run((tests, 1), (one, 0)) == "changed", "a failure seen before any edit, then an edit"
    assert run((one, 0), (tests, 0)) is None and run((one, None), (tests, None)) is None
