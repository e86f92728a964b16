"""Behaviour analytics: what an agent did with its tools, per trial and per step.

Three measures, computed from each trial's tool calls in order:

- ``verified_after_edit``: after its last file change, the trial ran the test suite or ran
  the edited code (a command that names an edited file or its module). Share of the trials
  that edited something.
- ``files_before_edit``: distinct files inspected (read, searched, printed) before the first
  edit (over the whole trial when it never edits). Mean over trials that made tool calls.
- ``tests_after_change``: the trial ran the test suite after its first file change. Share of
  the trials that edited something.
- ``correction_rate``: of the trials that saw a test run fail (its exit status, where the
  harness reports one), the share the verifier rewarded.
- ``after_failure_changed`` / ``_repeated`` / ``_stopped``: what the trials that saw a test
  run fail did next (shares of them): edited again with an edit not made before the failure,
  edited again only as before (the same command or arguments), or made no further edit.

Tool calls come from ``TrialResult.harness["tool_calls"]`` (a list of ``{"name",
"arguments"}``, the contract for harness plugins that know them), else from the proxy's call
records (``record["tool_calls"]``, when the proxy emits them), else from the transcript's
rendering (``$ command`` lines, ``[tool NAME] {json}``, ``[file change]``; see
:func:`transcript_tool_calls`). Each harness's tool vocabulary maps a call to actions:

| harness | tool | action |
|---|---|---|
| claude-code | Read, Grep (path) | inspect |
| claude-code | Edit, MultiEdit, Write, NotebookEdit | edit |
| claude-code | Bash (command) | shell command, see :mod:`lego_rl.observe.shell_commands` |
| codex | exec_command (cmd), shell / local_shell (command) | shell command |
| codex | apply_patch (input: ``*** Update/Add/Delete File: path``), file_change | edit |
| mini-swe-agent | bash (command) | shell command |

Unknown harnesses use the union of these vocabularies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from lego_rl.observe.shell_commands import (
    EDIT,
    INSPECT,
    RUN,
    TEST,
    Action,
    classify_shell,
    mentions,
    normalise,
)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    exit_code: int | None = None
    """The command's exit status, where the harness reports it (Codex's events do)."""


def _shell(key: str) -> Callable[[dict[str, Any]], list[Action]]:
    def actions(args: dict[str, Any]) -> list[Action]:
        command = args.get(key, args.get("command", ""))
        if isinstance(command, list):  # codex's shell tool: argv, often ["bash", "-lc", "..."]
            command = (
                command[-1]
                if command[:2] in (["bash", "-lc"], ["bash", "-c"])
                else " ".join(command)
            )
        return classify_shell(str(command))

    return actions


def _file(kind: str, *keys: str) -> Callable[[dict[str, Any]], list[Action]]:
    def actions(args: dict[str, Any]) -> list[Action]:
        files = [normalise(str(args[k])) for k in keys if args.get(k)]
        return [Action(kind, files, json.dumps(args)[:200])]

    return actions


PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.MULTILINE)


def _patch(args: dict[str, Any]) -> list[Action]:
    text = str(args.get("input", args.get("patch", "")))
    return [Action(EDIT, [normalise(f) for f in PATCH_FILE.findall(text)], text[:200])]


def _file_change(args: dict[str, Any]) -> list[Action]:
    changes = [c for c in args.get("changes", []) if isinstance(c, dict) and c.get("path")]
    return [Action(EDIT, [normalise(str(c["path"])) for c in changes], "file change")]


Vocabulary = dict[str, Callable[[dict[str, Any]], list[Action]]]
VOCABULARIES: dict[str, Vocabulary] = {
    "claude-code": {
        "Read": _file(INSPECT, "file_path"),
        "Grep": _file(INSPECT, "path"),
        "Edit": _file(EDIT, "file_path"),
        "MultiEdit": _file(EDIT, "file_path"),
        "Write": _file(EDIT, "file_path"),
        "NotebookEdit": _file(EDIT, "notebook_path"),
        "Bash": _shell("command"),
    },
    "codex": {
        "exec_command": _shell("cmd"),
        "shell": _shell("command"),
        "local_shell": _shell("command"),
        "apply_patch": _patch,
        "file_change": _file_change,
    },
    "mini-swe-agent": {"bash": _shell("command")},
}
ANY_HARNESS: Vocabulary = {k: v for vocab in VOCABULARIES.values() for k, v in vocab.items()}


def tool_calls(
    trial: dict[str, Any], call_records: Iterable[dict[str, Any]] = (), harness_name: str = ""
) -> list[ToolCall]:
    """The tool calls of one trial (a TrialResult as JSON), in order; see the module doc."""
    harness = trial.get("harness") or {}
    listed = harness.get("tool_calls")
    if not listed:
        listed = [c for record in call_records for c in record.get("tool_calls") or []]
    if listed:
        return [_from_listed(c) for c in listed if isinstance(c, dict)]
    return transcript_tool_calls(str(harness.get("transcript", "")), harness_name)


def _from_listed(call: dict[str, Any]) -> ToolCall:
    function = call.get("function")
    if not isinstance(function, dict):
        function = call
    args = function.get("arguments", function.get("input", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            args = {"input": args}
    code = call.get("exit_code")
    return ToolCall(
        str(function.get("name", "")),
        args if isinstance(args, dict) else {},
        code if isinstance(code, int) and not isinstance(code, bool) else None,
    )


BLOCK = re.compile(r"\n\n(?=\[|\$ )")
TOOL_BLOCK = re.compile(r"^\[tool (\S+)\] (\{.*\})$", re.DOTALL)
FILE_CHANGE_BLOCK = re.compile(r"^\[file change\] (\[.*\])$", re.DOTALL)


def transcript_tool_calls(transcript: str, harness: str = "") -> list[ToolCall]:
    """Tool calls as the harness plugins render them in a transcript.

    ``$ command`` lines are shell calls (a command runs to the next ``$`` line or the block's
    end; Codex prints the output under its command, so there it is the first line only);
    ``[tool NAME] {json}`` blocks are Claude Code's other tools; ``[file change] [...]``
    blocks are Codex's patches.
    """
    calls: list[ToolCall] = []
    for block in BLOCK.split(transcript):
        if match := TOOL_BLOCK.match(block):
            calls.append(_from_listed({"name": match.group(1), "arguments": match.group(2)}))
            continue
        if match := FILE_CHANGE_BLOCK.match(block):
            try:
                calls.append(ToolCall("file_change", {"changes": json.loads(match.group(1))}))
                continue
            except ValueError:
                pass
        current: list[str] | None = None
        for line in block.split("\n"):
            if line.startswith("$ "):
                if current is not None:
                    calls.append(_bash(current))
                current = [line[2:]]
            elif current is not None and harness != "codex":
                current.append(line)
        if current is not None:
            calls.append(_bash(current[:1] if harness == "codex" else current))
    return calls


def _bash(lines: list[str]) -> ToolCall:
    return ToolCall("bash", {"command": "\n".join(lines).rstrip("\n")})


def actions(calls: list[ToolCall], harness: str) -> list[Action]:
    return [action for _, action in call_actions(calls, harness)]


def call_actions(calls: list[ToolCall], harness: str) -> list[tuple[ToolCall, Action]]:
    """Each call's actions in order, beside the call they came from."""
    vocabulary = VOCABULARIES.get(harness, ANY_HARNESS)
    out: list[tuple[ToolCall, Action]] = []
    for call in calls:
        to_actions = vocabulary.get(call.name) or ANY_HARNESS.get(call.name)
        if to_actions is not None:
            out.extend((call, action) for action in to_actions(call.arguments))
    return out


def trial_behaviour(calls: list[ToolCall], harness: str, reward: float | None = None) -> dict[str, Any]:
    """The measures of one trial (None where a measure does not apply).

    ``failed_test_run``: a test run's exit status was known and not 0 (None when no test
    run's status is known); with ``reward`` it gives the correction rate of the step."""
    paired = call_actions(calls, harness)
    acts = [action for _, action in paired]
    statuses = [call.exit_code for call, action in paired if action.kind == TEST and call.exit_code is not None]
    edits = [i for i, a in enumerate(acts) if a.kind == EDIT]
    first = edits[0] if edits else len(acts)
    inspected = {f for a in acts[:first] if a.kind == INSPECT for f in a.files}
    out: dict[str, Any] = {
        "tool_calls": len(calls),
        "edited": bool(edits),
        "files_before_edit": len(inspected) if calls else None,
        "verified_after_edit": None,
        "tests_after_change": None,
        "failed_test_run": any(code != 0 for code in statuses) if statuses else None,
        "after_failed_test": after_failed_test(paired),
        "reward": reward,
    }
    if edits:
        edited = sorted({f for i in edits for f in acts[i].files})
        after_last = acts[edits[-1] + 1 :]
        out["verified_after_edit"] = any(
            a.kind == TEST or (a.kind == RUN and mentions(" ".join(a.files) + " " + a.text, edited))
            for a in after_last
        )
        out["tests_after_change"] = any(a.kind == TEST for a in acts[first + 1 :])
    return out


AFTER_FAILURE = ("changed", "repeated", "stopped")
"""What a trial did after its first failed test run (:func:`after_failed_test`)."""


def after_failed_test(paired: list[tuple[ToolCall, Action]]) -> str | None:
    """``changed``: its next edit is not one made before the failure; ``repeated``: it is;
    ``stopped``: no edit follows. None when no test run is known to have failed."""
    failed = next((i for i, (call, a) in enumerate(paired) if a.kind == TEST and call.exit_code not in (None, 0)), None)
    if failed is None:
        return None
    acts = [action for _, action in paired]
    before = {(a.text, tuple(a.files)) for a in acts[:failed] if a.kind == EDIT}
    following = next((a for a in acts[failed + 1 :] if a.kind == EDIT), None)
    if following is None:
        return "stopped"
    return "repeated" if (following.text, tuple(following.files)) in before else "changed"


def step_behaviour(per_trial: list[dict[str, Any]]) -> dict[str, float | None]:
    """Aggregate of the trials of one step: shares over editing trials, mean files, the
    correction rate (the share rewarded of the trials that saw a test run fail) and what those
    trials did next (``after_failure_*``)."""
    editing = [t for t in per_trial if t["edited"]]
    corrected = [t.get("reward") == 1.0 for t in per_trial if t.get("failed_test_run") and t.get("reward") is not None]
    with_calls = [t for t in per_trial if t["files_before_edit"] is not None]
    after = [t["after_failed_test"] for t in per_trial if t.get("after_failed_test")]

    def share(key: str) -> float | None:
        return sum(bool(t[key]) for t in editing) / len(editing) if editing else None

    return {
        "trials": len(per_trial),
        "edit_share": len(editing) / len(per_trial) if per_trial else None,
        "verified_after_edit": share("verified_after_edit"),
        "tests_after_change": share("tests_after_change"),
        "files_before_edit": (
            sum(t["files_before_edit"] for t in with_calls) / len(with_calls)
            if with_calls
            else None
        ),
        "correction_rate": sum(corrected) / len(corrected) if corrected else None,
        **{f"after_failure_{move}": share_of(after, move) for move in AFTER_FAILURE},
    }


def share_of(values: list[str], value: str) -> float | None:
    return values.count(value) / len(values) if values else None
