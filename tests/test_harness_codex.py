"""The Codex harness: preflight, config, command line, outcome mapping, and the real CLI end to end.

The end-to-end tests run the unmodified native `codex` program in the local bubblewrap
sandbox on the kit's fix-add task, against a scripted OpenAI Responses server (SSE) on
127.0.0.1.
"""

from __future__ import annotations

import json
import tomllib
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
    streamed,
)
from legorl_codex import Codex, CodexOptions, plugin
from legorl_codex.config import build_config, to_toml
from legorl_codex.harness import vendor_dir
from legorl_codex.outcome import classify, render_transcript

from lego_rl.data import Termination
from lego_rl.kinds import Endpoint, ExecResult, Harness, HarnessResult, first_fatal
from lego_rl.registry import Registry
from lego_rl.testing.contracts import ContractEnv

ENDPOINT = Endpoint(base_url="http://127.0.0.1:1/s/trial-1", api_key="sk-session", model="policy")
installed = pytest.mark.skipif(not (vendor_dir() / "bin" / "codex").is_file(), reason="Codex is not installed (scripts/setup.sh)")


@pytest.fixture
def registry() -> Iterator[Registry]:
    yield from plugin_registry(plugin, "codex", "legorl-codex")


# ---------------------------------------------------------------- registration, preflight


def test_registered_with_its_dialect(registry: Registry) -> None:
    assert registry.get("harness", "codex").factory.dialect == "openai-responses"
    assert isinstance(registry.build("harness", "codex"), Harness)
    with pytest.raises(ValueError, match="retry"):
        registry.options("harness", "codex", {"retry": 3})


@installed
def test_preflight_passes_with_the_installed_cli(registry: Registry) -> None:
    assert registry.build("harness", "codex").preflight() == []


@pytest.mark.parametrize("command", ["/nonexistent/bin/codex", "no-such-codex-program"])
def test_preflight_names_the_missing_cli_and_the_install(registry: Registry, command: str) -> None:
    problem = first_fatal(registry.build("harness", "codex", {"command": command}).preflight())
    assert problem is not None and command in problem.message
    assert "@openai/codex@0.171.0" in problem.fix and "npm ci" in problem.fix


# ---------------------------------------------------------------- config, command line


def test_config_points_a_responses_provider_at_the_proxy() -> None:
    options = CodexOptions(retries=1, config={"model_reasoning_effort": "low", "analytics": {"enabled": True}})
    config = tomllib.loads(to_toml(build_config(options, ENDPOINT, timeout=90, context=8192)))
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == "http://127.0.0.1:1/s/trial-1/v1"
    assert provider["wire_api"] == "responses" and provider["env_key"] == "LEGORL_API_KEY"
    assert provider["request_max_retries"] == provider["stream_max_retries"] == 1
    assert config["model"] == "policy" and config["model_context_window"] == 8192
    assert config["features"] == {"plugins": False} and config["agents"] == {"enabled": False} and config["web_search"] == "disabled"
    assert config["model_reasoning_effort"] == "low" and config["analytics"] == {"enabled": True}


def test_toml_writer_refuses_what_it_cannot_write() -> None:
    with pytest.raises(TypeError, match="config.toml"):
        to_toml({"x": None})


def test_command_line() -> None:
    line = Codex(CodexOptions(extra_args=["--ephemeral"])).command_line(Path("/o/vendor/t/bin/codex"), "/app")
    assert line.startswith('PATH=/o/vendor/t/codex-path:"$PATH" /o/vendor/t/bin/codex exec --skip-git-repo-check --json ')
    assert "--dangerously-bypass-approvals-and-sandbox -C /app --ephemeral - <" in line
    assert line.endswith("</logs/agent/instruction.md >/logs/agent/codex.jsonl")


def test_conformance_script_runs_commands_with_exec_command_then_finishes() -> None:
    turns = Codex(CodexOptions()).conformance_script(["ls"])
    assert turns[0]["tool_calls"] == [{"name": "exec_command", "arguments": {"cmd": "ls"}}]
    assert turns[1] == {"text": "Done."}


# ---------------------------------------------------------------- outcome mapping


def _events(end: dict[str, Any] | None) -> list[dict[str, Any]]:
    start = [{"type": "thread.started", "thread_id": "th"}, {"type": "turn.started"}]
    return start + ([end] if end else [])


def _failed(message: str) -> dict[str, Any]:
    return {"type": "turn.failed", "error": {"message": message}}


@pytest.mark.parametrize(
    ("execution", "events", "expected"),
    [
        (ExecResult(0), _events({"type": "turn.completed", "usage": {}}), Termination.COMPLETED),
        (ExecResult(124, timed_out=True), _events(None), Termination.AGENT_TIMEOUT),
        (ExecResult(1), _events(_failed("unexpected status 500: backend down")), Termination.API_ERROR),
        (ExecResult(1), _events(_failed("Codex ran out of room in the model's context window.")), Termination.CONTEXT_OVERFLOW),
        (ExecResult(1), _events(_failed("Incomplete response returned, reason: max_output_tokens")), Termination.OUTPUT_LIMIT),
        (ExecResult(2, stderr="error: unexpected argument '--nope'"), [], Termination.HARNESS_CRASH),
    ],
    ids=["completed", "killed", "api-500", "context", "output-limit", "crash"],
)
def test_outcome_mapping(execution: ExecResult, events: list[dict[str, Any]], expected: Termination) -> None:
    result = classify(execution, events)
    assert result.termination == expected
    assert result.reason
    if expected == Termination.HARNESS_CRASH:
        assert "unexpected argument '--nope'" in result.reason


def test_transcript_shows_commands_with_output() -> None:
    events = [
        {"type": "item.completed", "item": {"type": "agent_message", "text": "look"}},
        {"type": "item.started", "item": {"type": "command_execution", "command": "ls"}},
        {"type": "item.completed", "item": {"type": "command_execution", "command": "ls", "aggregated_output": "calc.py\n"}},
        _failed("boom"),
    ]
    assert render_transcript(events) == "[assistant]\nlook\n\n$ ls\ncalc.py\n\n[turn failed] boom"


# ---------------------------------------------------------------- end to end (test doubles)


def sse_events(n: int, body: dict[str, Any], turn: Turn) -> list[dict[str, Any]]:
    """A message item, then an exec_command function call when the turn has one."""
    text = turn.get("text", "")
    message = {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
    output = [message]
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": f"resp_{n}", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": {**message, "content": []}},
        {"type": "response.output_text.delta", "item_id": f"msg_{n}", "output_index": 0, "content_index": 0, "delta": text},
        {"type": "response.output_item.done", "output_index": 0, "item": message},
    ]
    if "cmd" in turn:
        call = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "exec_command",
                "arguments": json.dumps({"cmd": turn["cmd"]}), "status": "completed"}  # fmt: skip
        output.append(call)
        events += [
            {"type": "response.output_item.added", "output_index": 1, "item": call},
            {"type": "response.output_item.done", "output_index": 1, "item": call},
        ]
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    done = {"id": f"resp_{n}", "status": "completed", "output": output, "usage": usage}
    return [*events, {"type": "response.completed", "response": done}]


def error(message: str) -> dict[str, Any]:
    return {"error": {"type": "server_error", "message": message}}


def trial(tmp_path: Path, reply: Callable[[int, dict[str, Any]], Turn], **options: Any) -> tuple[HarnessResult, FakeServer, str]:
    """One run against a scripted OpenAI Responses server (SSE): {"text": ..., "cmd": command}
    or {"status": int, "error": message} a turn."""
    result, server, calc = run_trial(tmp_path, Codex(CodexOptions(**options)), streamed(reply, sse_events, error))
    return result, server, calc


@end_to_end(installed)
def test_fixes_the_file_and_completes(tmp_path: Path) -> None:
    result, server, calc = trial(tmp_path, lambda n, body: {"text": "Fixing.", "cmd": FIX} if n == 1 else {"text": "Done."})

    first = assert_fixed(result, server, calc, "/s/trial-1/v1/responses")
    assert first["auth"] == "Bearer sk-session"
    assert first["body"]["stream"] is True
    assert "exec_command" in [t.get("name") for t in first["body"]["tools"]]
    assert {t["type"] for t in first["body"]["tools"]} == {"function"}, "no web search, no namespaces"
    assert "defines `add(a, b)`, but it subtracts" in json.dumps(first["body"]["input"])
    last = server.requests[1]["body"]["input"][-1]
    assert last["type"] == "function_call_output" and last["call_id"] == "call_1"
    assert "sed -i 's/a - b/a + b/' calc.py" in result.transcript
    assert result.details["commands"] == 1 and result.details["turns"] == 1


@end_to_end(installed)
def test_server_error_fails_fast_as_api_error(tmp_path: Path) -> None:
    result, server, _ = trial(tmp_path, lambda n, body: {"status": 500, "error": "inference backend is down"})

    assert_failed_fast(result, server)


@end_to_end(installed)
def test_harness_contract_fails_a_script_that_does_not_solve(tmp_path: Path) -> None:
    from lego_rl.registry import default_registry
    from lego_rl.testing.contracts import ContractError, contract_named

    harness = Codex(CodexOptions())
    harness.conformance_script = lambda commands: [{"text": "I will not change anything."}]  # type: ignore[method-assign]
    with pytest.raises(ContractError, match=r"solving script: reward 0.0 != 1.0"):
        contract_named("harness.solves-task").check(harness, ContractEnv(tmp=tmp_path, registry=default_registry()))


@end_to_end(installed)
def test_own_instructions_replace_codexs_base_instructions(tmp_path: Path) -> None:
    mine = "You fix one bug with one shell command."
    result, server, calc = trial(
        tmp_path / "own", lambda n, body: {"text": "Fixing.", "cmd": FIX} if n == 1 else {"text": "Done."}, instructions=mine
    )
    own = json.dumps(assert_fixed(result, server, calc, "/s/trial-1/v1/responses")["body"])
    _, plain_server, _ = trial(tmp_path / "plain", lambda n, body: {"text": "Done."})
    plain = json.dumps(plain_server.requests[0]["body"])
    assert mine in own and mine not in plain
    assert len(own) < len(plain) - 5000, "Codex's own base instructions (~10 KB) are gone"
