"""The OpenHands harness: preflight, settings, command line, outcome mapping, and the real CLI
end to end.

The end-to-end tests run the unmodified `openhands` CLI (from the plugin's own virtualenv)
in the local bubblewrap sandbox on the kit's fix-add task, against a scripted OpenAI chat
server on 127.0.0.1, and through the proxy with the harness contracts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness_fakes import FIX, assert_failed_fast, assert_fixed, end_to_end, plugin_registry, run_trial
from legorl_openhands import OpenHands, OpenHandsOptions, plugin
from legorl_openhands.harness import OPENHANDS, command_line
from legorl_openhands.outcome import classify, render_transcript
from legorl_openhands.settings import build_settings

from lego_rl import harness_kit as kit
from lego_rl.data import Termination
from lego_rl.kinds import Endpoint, ExecResult, Harness, HarnessResult, first_fatal
from lego_rl.registry import Registry

ENDPOINT = Endpoint(base_url="http://127.0.0.1:1/s/trial-1", api_key="sk-session", model="policy")
installed = pytest.mark.skipif(not OPENHANDS.is_file(), reason="OpenHands is not installed (plugin .venv)")


@pytest.fixture
def registry() -> Iterator[Registry]:
    yield from plugin_registry(plugin, "openhands", "legorl-openhands")


# ---------------------------------------------------------------- registration, preflight


def test_registered_with_its_dialect(registry: Registry) -> None:
    assert registry.get("harness", "openhands").factory.dialect == "openai-chat"
    assert isinstance(registry.build("harness", "openhands", {"retries": 1}), Harness)
    with pytest.raises(ValueError, match="max_turns"):
        registry.options("harness", "openhands", {"max_turns": 3})


@installed
def test_preflight_passes_with_the_installed_cli(registry: Registry) -> None:
    assert registry.build("harness", "openhands").preflight() == []


@pytest.mark.parametrize("command", ["/nonexistent/bin/openhands", "no-such-openhands-program"])
def test_preflight_names_the_missing_cli_and_the_install(registry: Registry, command: str) -> None:
    problem = first_fatal(registry.build("harness", "openhands", {"command": command}).preflight())
    assert problem is not None
    assert command in problem.message
    assert "requirements.txt" in problem.fix and "venv" in problem.fix


def test_venv_version_reads_the_virtualenvs_own_metadata(tmp_path: Path) -> None:
    dist = tmp_path / "lib" / "python3.12" / "site-packages" / "openhands-9.8.7.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: openhands\nVersion: 9.8.7\n")
    assert kit.venv_version(tmp_path, "openhands") == "9.8.7"
    assert kit.venv_version(tmp_path, "other") == ""
    assert kit.venv_version(tmp_path / "missing", "openhands") == ""


# ---------------------------------------------------------------- settings, command line, script


def test_settings_point_the_model_at_the_proxy_without_retries() -> None:
    options = OpenHandsOptions(llm={"max_output_tokens": 256, "timeout": 30})
    llm = build_settings(options, ENDPOINT, timeout=100.5)["llm"]
    assert llm["model"] == "hosted_vllm/policy"
    assert llm["base_url"] == "http://127.0.0.1:1/s/trial-1/v1"
    assert llm["api_key"] == "sk-session"
    assert llm["num_retries"] == 1, "attempts in all: one call, no retry"
    assert llm["reasoning_effort"] is None and llm["caching_prompt"] is False
    assert llm["max_output_tokens"] == 256 and llm["timeout"] == 30
    assert build_settings(OpenHandsOptions(retries=2, model_prefix="openai/"), ENDPOINT, 100)["llm"]["num_retries"] == 3


def test_command_line_is_headless_with_json_events_to_the_file() -> None:
    line = command_line(Path("/opt/oh dir/bin/openhands"))
    assert line.startswith("'/opt/oh dir/bin/openhands' --headless --json -t ")
    assert '"$(cat /logs/agent/instruction.md)"' in line
    assert line.endswith("</dev/null >/logs/agent/openhands.jsonl")


def test_conformance_script_runs_commands_with_the_terminal_tool_then_answers() -> None:
    turns = OpenHands(OpenHandsOptions()).conformance_script(["ls"])
    assert turns[0]["tool_calls"] == [{"name": "terminal", "arguments": {"command": "ls", "security_risk": "LOW"}}]
    assert turns[-1] == {"text": "Done."}
    assert OpenHands(OpenHandsOptions()).conformance_script([]) == [{"text": "Nothing to change."}]


# ---------------------------------------------------------------- outcome mapping


def _message(source: str, text: str, response: str | None = None) -> dict[str, Any]:
    role = "assistant" if source == "agent" else "user"
    return {"kind": "MessageEvent", "source": source, "llm_response_id": response,
            "llm_message": {"role": role, "content": [{"type": "text", "text": text}]}}  # fmt: skip


def _action(tool: str, response: str, **action: Any) -> dict[str, Any]:
    return {"kind": "ActionEvent", "source": "agent", "tool_name": tool, "llm_response_id": response,
            "thought": [], "action": action, "tool_call": {"arguments": json.dumps(action)}}  # fmt: skip


def _observation(text: str) -> dict[str, Any]:
    return {"kind": "ObservationEvent", "source": "environment", "tool_name": "terminal",
            "observation": {"content": [{"type": "text", "text": text}]}}  # fmt: skip


def _error(code: str, detail: str) -> dict[str, Any]:
    return {"kind": "ConversationErrorEvent", "source": "environment", "code": code, "detail": detail}


TASK = _message("user", "Fix add")
RAN = [TASK, _action("terminal", "c0", command="ls"), _observation("calc.py")]


@pytest.mark.parametrize(
    ("execution", "events", "expected"),
    [
        (ExecResult(0), [*RAN, _message("agent", "Done.", "c1")], Termination.COMPLETED),
        (ExecResult(0), [*RAN, _action("finish", "c1", message="ok")], Termination.COMPLETED),
        (ExecResult(0), RAN, Termination.MAX_TURNS),
        (ExecResult(0), [*RAN, _error("MaxIterationsReached", "Agent reached maximum iterations limit (500).")], Termination.MAX_TURNS),
        (ExecResult(124, timed_out=True), RAN, Termination.AGENT_TIMEOUT),
        (
            ExecResult(0),
            [TASK, _error("LLMServiceUnavailableError", "litellm.InternalServerError: Hosted_vllmException - down")],
            Termination.API_ERROR,
        ),
        (
            ExecResult(0),
            [TASK, _error("LLMBadRequestError", "litellm.BadRequestError: this model's maximum context length is 8192")],
            Termination.CONTEXT_OVERFLOW,
        ),
        (ExecResult(0), [TASK, _error("LLMContextWindowExceedError", "too long")], Termination.CONTEXT_OVERFLOW),
        (ExecResult(0), [TASK, _error("KeyError", "'command'")], Termination.HARNESS_CRASH),
        (ExecResult(1, stderr="Traceback: no such option"), [], Termination.HARNESS_CRASH),
        (ExecResult(0), [TASK], Termination.HARNESS_CRASH),
    ],
    ids=[
        "message", "finish-tool", "stuck", "iterations", "killed", "api-500", "context-400",
        "context-code", "crash", "exit-1", "no-agent-event",
    ],
)
def test_outcome_mapping(execution: ExecResult, events: list[dict[str, Any]], expected: Termination) -> None:
    result = classify(execution, events)
    assert result.termination == expected
    assert result.reason
    if execution.exit_code == 1:
        assert "no such option" in result.reason
    assert result.details["commands"] == (1 if events[1:2] == RAN[1:2] else 0)


def test_transcript_shows_commands_and_their_output() -> None:
    events = [*RAN, _message("agent", "Done.", "c1")]
    assert render_transcript(events) == "[user]\nFix add\n\n[assistant]\n$ ls\n\n[tool terminal]\ncalc.py\n\n[assistant]\nDone."
    assert classify(ExecResult(0), events).details["model_calls"] == 2


# ---------------------------------------------------------------- end to end (test doubles)


def chat_reply(n: int, message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    reason = "tool_calls" if message.get("tool_calls") else "stop"
    return 200, {
        "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": "policy",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": reason}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }  # fmt: skip


def fix_then_answer(n: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if n > 1:
        return chat_reply(n, {"content": "Done."})
    arguments = json.dumps({"command": FIX, "security_risk": "LOW"})
    call = {"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": arguments}}
    return chat_reply(n, {"content": None, "tool_calls": [call]})


def trial(tmp_path: Path, reply: Any) -> tuple[HarnessResult, Any, str]:
    return run_trial(tmp_path, OpenHands(OpenHandsOptions()), reply)


@end_to_end(installed)
def test_fixes_the_file_and_completes(tmp_path: Path) -> None:
    result, server, calc = trial(tmp_path, fix_then_answer)

    first = assert_fixed(result, server, calc, "/s/trial-1/v1/chat/completions")
    assert first["auth"] == "Bearer sk-session"
    assert not first["body"].get("stream")
    tools = [t["function"]["name"] for t in first["body"]["tools"]]
    assert "terminal" in tools and "finish" in tools and not any("browser" in t for t in tools)
    assert "reasoning_effort" not in first["body"]
    last = server.requests[1]["body"]["messages"][-1]
    assert last["role"] == "tool" and last["tool_call_id"] == "call_1"
    assert f"$ {FIX}" in result.transcript
    assert result.details["commands"] == 1 and result.details["model_calls"] == 2


@end_to_end(installed)
def test_server_error_fails_fast_as_api_error(tmp_path: Path) -> None:
    def reply(n: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 500, {"error": {"message": "inference backend is down", "type": "server_error"}}

    result, server, _ = trial(tmp_path, reply)

    assert_failed_fast(result, server)
    assert "inference backend is down" in result.reason

