"""The Claude Code harness: preflight, command line, outcome mapping, and the real CLI end to end.

The end-to-end tests run the unmodified native `claude` program in the local bubblewrap
sandbox on the kit's fix-add task, against a scripted Anthropic messages server (SSE) on
127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness_fakes import (
    FIX,
    FakeServer,
    Turn,
    assert_failed_fast,
    assert_fixed,
    end_to_end,
    plugin_registry,
    run_trial,
    spec_with,
    streamed,
)
from legorl_claude_code import ClaudeCode, ClaudeCodeOptions, plugin
from legorl_claude_code.harness import native_binary
from legorl_claude_code.outcome import classify, render_transcript

from lego_rl.data import Termination
from lego_rl.kinds import Endpoint, ExecResult, Harness, HarnessResult, first_fatal
from lego_rl.registry import BuildContext, Registry

ENDPOINT = Endpoint(base_url="http://127.0.0.1:1/s/trial-1", api_key="sk-session", model="policy", small_model="policy-sub")
installed = pytest.mark.skipif(not native_binary().is_file(), reason="Claude Code is not installed (scripts/setup.sh)")


@pytest.fixture
def registry() -> Iterator[Registry]:
    yield from plugin_registry(plugin, "claude-code", "legorl-claude-code")


# ---------------------------------------------------------------- registration, preflight


def test_registered_with_its_dialect(registry: Registry) -> None:
    assert registry.get("harness", "claude-code").factory.dialect == "anthropic-messages"
    assert isinstance(registry.build("harness", "claude-code", {"max_turns": 3}), Harness)
    with pytest.raises(ValueError, match="max_turn"):
        registry.options("harness", "claude-code", {"max_turn": 3})


@installed
def test_preflight_passes_with_the_installed_cli(registry: Registry) -> None:
    assert registry.build("harness", "claude-code").preflight() == []


@installed
def test_preflight_checks_the_version_the_spec_wants(registry: Registry) -> None:
    assert registry.build("harness", "claude-code", {"version": "2.1"}).preflight() == []
    problem = first_fatal(registry.build("harness", "claude-code", {"version": "2.2"}).preflight())
    assert problem is not None and "2.2" in problem.message and "2.1.332" in problem.message


@pytest.mark.parametrize("command", ["/nonexistent/bin/claude", "no-such-claude-program"])
def test_preflight_names_the_missing_cli_and_the_install(registry: Registry, command: str) -> None:
    problem = first_fatal(registry.build("harness", "claude-code", {"command": command}).preflight())
    assert problem is not None and command in problem.message
    assert "@anthropic-ai/claude-code@2.1.332" in problem.fix and "npm ci" in problem.fix


# ---------------------------------------------------------------- command line, environment


def test_command_line_and_environment() -> None:
    harness = ClaudeCode(ClaudeCodeOptions(max_turns=4, bare=True, tools=["Bash", "Edit"], retries=2))
    line = harness.command_line(Path("/opt/claude"))
    assert line.startswith("/opt/claude -p --output-format stream-json --verbose --max-turns 4 ")
    assert "--dangerously-skip-permissions --bare --tools Bash,Edit" in line
    assert line.endswith("</logs/agent/instruction.md >/logs/agent/claude-code.jsonl")
    env = harness.model_env(ENDPOINT, timeout=90)
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:1/s/trial-1"
    assert env["ANTHROPIC_API_KEY"] == "sk-session"
    assert env["ANTHROPIC_MODEL"] == env["ANTHROPIC_DEFAULT_SONNET_MODEL"] == "policy"
    assert env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == "policy-sub"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "2" and env["API_TIMEOUT_MS"] == "90000"
    assert "CLAUDE_CODE_MAX_OUTPUT_TOKENS" not in env, "no spec: Claude Code keeps its own limit"


def test_output_limit_follows_the_spec() -> None:
    spec = spec_with({"max_tokens": 48, "max_turns": 5})
    harness = ClaudeCode(ClaudeCodeOptions(), BuildContext(spec=spec))
    assert harness.model_env(ENDPOINT, timeout=9)["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "48"
    assert "--max-turns 5 " in harness.command_line(Path("/opt/claude"))


def test_conformance_script_runs_commands_with_bash_then_finishes() -> None:
    turns = ClaudeCode(ClaudeCodeOptions()).conformance_script(["ls", "pwd"])
    assert [t["tool_calls"][0]["arguments"]["command"] for t in turns[:2]] == ["ls", "pwd"]
    assert turns[-1] == {"text": "Done."} and len(turns) == 3


# ---------------------------------------------------------------- outcome mapping


def _result(**fields: Any) -> list[dict[str, Any]]:
    return [{"type": "system", "subtype": "init"}, {"type": "result", "subtype": "success", "is_error": False, **fields}]


@pytest.mark.parametrize(
    ("execution", "events", "expected"),
    [
        (ExecResult(0), _result(num_turns=2), Termination.COMPLETED),
        (ExecResult(1), _result(subtype="error_max_turns", is_error=True, terminal_reason="max_turns"), Termination.MAX_TURNS),
        (ExecResult(124, timed_out=True), [], Termination.AGENT_TIMEOUT),
        (ExecResult(1), _result(is_error=True, terminal_reason="api_error", api_error_status=500, result="boom"), Termination.API_ERROR),
        (ExecResult(1), _result(is_error=True, terminal_reason="prompt_too_long", api_error_status=400), Termination.CONTEXT_OVERFLOW),
        (ExecResult(1), _result(is_error=True, terminal_reason="api_error", api_error="max_output_tokens"), Termination.OUTPUT_LIMIT),
        (ExecResult(1), _result(subtype="error_during_execution", is_error=True), Termination.HARNESS_CRASH),
        (ExecResult(2, stderr="error: unknown option '--nope'"), [], Termination.HARNESS_CRASH),
    ],
    ids=["completed", "max-turns", "killed", "api-500", "context", "output-limit", "crash", "no-result"],
)
def test_outcome_mapping(execution: ExecResult, events: list[dict[str, Any]], expected: Termination) -> None:
    result = classify(execution, events)
    assert result.termination == expected
    assert result.reason
    if not events and not execution.timed_out:
        assert "unknown option '--nope'" in result.reason


def test_transcript_shows_bash_calls_as_commands() -> None:
    events = [
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "look"}]}},
        {"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}]}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "content": "calc.py"}]}},
    ]
    assert render_transcript(events) == "[assistant]\nlook\n\n$ ls\n\n[tool result]\ncalc.py"


# ---------------------------------------------------------------- end to end (test doubles)


def sse_events(n: int, body: dict[str, Any], turn: Turn) -> list[dict[str, Any]]:
    """A text block, then a Bash tool_use block when the turn has one."""
    usage = {"input_tokens": 10, "output_tokens": 1}
    message = {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": body["model"], "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": usage}  # fmt: skip
    events = [{"type": "message_start", "message": message}]
    blocks = [({"type": "text", "text": ""}, {"type": "text_delta", "text": turn.get("text", "")})]
    if "bash" in turn:
        tool = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {}}
        blocks.append((tool, {"type": "input_json_delta", "partial_json": json.dumps({"command": turn["bash"]})}))
    for index, (start, delta) in enumerate(blocks):
        events += [
            {"type": "content_block_start", "index": index, "content_block": start},
            {"type": "content_block_delta", "index": index, "delta": delta},
            {"type": "content_block_stop", "index": index},
        ]
    stop = "tool_use" if "bash" in turn else "end_turn"
    events.append({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}})
    return [*events, {"type": "message_stop"}]


def error(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "api_error", "message": message}}


def trial(tmp_path: Path, reply: Callable[[int, dict[str, Any]], Turn], **options: Any) -> tuple[HarnessResult, FakeServer, str]:
    """One run against a scripted Anthropic messages server (SSE): {"text": ..., "bash": command}
    or {"status": int, "error": message} a turn."""
    harness = ClaudeCode(ClaudeCodeOptions(**options))
    result, server, calc = run_trial(tmp_path, harness, streamed(reply, sse_events, error), small_model="policy")
    return result, server, calc


@end_to_end(installed)
def test_fixes_the_file_and_completes(tmp_path: Path) -> None:
    result, server, calc = trial(tmp_path, lambda n, body: {"text": "Fixing.", "bash": FIX} if n == 1 else {"text": "Done."})

    first = assert_fixed(result, server, calc, "/s/trial-1/v1/messages?beta=true")
    assert first["key"] == "sk-session"
    assert first["body"]["stream"] is True
    assert "Bash" in [t["name"] for t in first["body"]["tools"]]
    assert "defines `add(a, b)`, but it subtracts" in json.dumps(first["body"]["messages"])
    last = server.requests[1]["body"]["messages"][-1]["content"]
    assert any(part.get("type") == "tool_result" and part["tool_use_id"] == "toolu_1" for part in last)
    assert "$ sed -i 's/a - b/a + b/' calc.py" in result.transcript
    assert result.details["num_turns"] == 2


@end_to_end(installed)
def test_turn_limit_ends_as_max_turns(tmp_path: Path) -> None:
    result, server, _ = trial(tmp_path, lambda n, body: {"text": "", "bash": "ls"}, max_turns=2)

    assert result.termination == Termination.MAX_TURNS, result.reason
    assert len(server.requests) == 2
    assert result.transcript.count("$ ls") == 2


@end_to_end(installed)
def test_server_error_fails_fast_as_api_error(tmp_path: Path) -> None:
    result, server, _ = trial(tmp_path, lambda n, body: {"status": 500, "error": "inference backend is down"})

    assert_failed_fast(result, server)
    assert "500" in result.reason


# ---------------------------------------------------------------- what the image must have


class _NoLoader:
    """A sandbox whose image lacks every file (``test -e`` fails)."""

    def __init__(self) -> None:
        self.commands: list[str] = []

    def exec(self, command: str, **_: Any) -> ExecResult:
        self.commands.append(command)
        return ExecResult(1, "", "", False, 0.0)


@installed
def test_an_image_without_glibc_is_named_before_claude_code_runs() -> None:
    from lego_rl.harness_kit import missing_loader

    sandbox = _NoLoader()
    result = missing_loader(sandbox, "Claude Code", native_binary())  # type: ignore[arg-type]
    assert sandbox.commands == ["test -e /lib64/ld-linux-x86-64.so.2"]
    assert result is not None and result.termination == Termination.SANDBOX_ERROR
    assert "no /lib64/ld-linux-x86-64.so.2 (glibc's dynamic loader)" in result.reason and str(native_binary()) in result.reason
    assert missing_loader(sandbox, "a script", Path(__file__)) is None and len(sandbox.commands) == 1, "not ELF: nothing to check"
