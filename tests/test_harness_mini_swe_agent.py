"""The mini-swe-agent harness: preflight, config, outcome mapping, and the real CLI end to end.

The end-to-end tests run the unmodified `mini` program inside a bubblewrap sandbox double
against a scripted OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import legorl_mini_swe_agent.plugin as plugin
import pytest
from harness_fakes import (
    FIX,
    FakeServer,
    assert_failed_fast,
    assert_fixed,
    end_to_end,
    plugin_registry,
    run_trial,
    spec_with,
)
from legorl_mini_swe_agent import MiniSweAgent, MiniSweAgentOptions
from legorl_mini_swe_agent.config import build_config
from legorl_mini_swe_agent.outcome import classify, render_transcript

from lego_rl.data import Termination
from lego_rl.kinds import Endpoint, ExecResult, Harness, HarnessResult, first_fatal
from lego_rl.registry import BuildContext, Registry

ENDPOINT = Endpoint(base_url="http://127.0.0.1:1/s/trial-1", api_key="sk-session", model="policy")


@pytest.fixture
def registry() -> Iterator[Registry]:
    yield from plugin_registry(plugin, "mini-swe-agent", "legorl-mini-swe-agent")


# ---------------------------------------------------------------- registration, preflight


def test_registered_with_its_dialect(registry: Registry) -> None:
    info = registry.get("harness", "mini-swe-agent")
    assert info.factory.dialect == "openai-chat"
    harness = registry.build("harness", "mini-swe-agent", {"max_turns": 3})
    assert isinstance(harness, Harness)
    with pytest.raises(ValueError, match="max_turn"):
        registry.options("harness", "mini-swe-agent", {"max_turn": 3})


def test_preflight_passes_with_the_installed_cli(registry: Registry) -> None:
    assert registry.build("harness", "mini-swe-agent").preflight() == []


@pytest.mark.parametrize("command", ["/nonexistent/bin/mini", "no-such-mini-program"])
def test_preflight_names_the_missing_cli_and_the_install(registry: Registry, command: str) -> None:
    harness = registry.build("harness", "mini-swe-agent", {"command": command})
    problem = first_fatal(harness.preflight())
    assert problem is not None
    assert command in problem.message
    assert "requirements.txt (scripts/setup.sh)" in problem.fix and "harness.options.command" in problem.fix


# ---------------------------------------------------------------- config


def test_config_points_the_model_at_the_proxy() -> None:
    options = MiniSweAgentOptions(
        max_turns=5, model_prefix="hosted_vllm/", config={"model": {"model_kwargs": {"temperature": 0.5}}}
    )
    config = build_config(options, ENDPOINT, "fix it", "/app", timeout=100, max_turns=5)
    assert config["agent"]["step_limit"] == 5
    kwargs = config["model"]["model_kwargs"]
    assert config["model"]["model_name"] == "hosted_vllm/policy"
    assert kwargs["api_base"] == "http://127.0.0.1:1/s/trial-1/v1"
    assert kwargs["api_key"] == "sk-session"
    assert kwargs["temperature"] == 0.5 and kwargs["max_retries"] == 0
    assert config["agent"]["step_limit"] == 5 and config["agent"]["cost_limit"] == 0
    assert config["agent"]["wall_time_limit_seconds"] == 90
    assert config["environment"] == {"environment_class": "local", "cwd": "/app", "timeout": 60}
    assert config["run"]["task"] == "fix it"


# ---------------------------------------------------------------- outcome mapping


def _trajectory(status: str, exception: str = "") -> dict[str, Any]:
    extra = {"exit_status": status, "exception_str": exception}
    exit_message = {"role": "exit", "content": exception, "extra": extra}
    return {"info": {"exit_status": status}, "messages": [exit_message]}


@pytest.mark.parametrize(
    ("execution", "trajectory", "expected"),
    [
        (ExecResult(0), _trajectory("Submitted"), Termination.COMPLETED),
        (ExecResult(0), _trajectory("LimitsExceeded"), Termination.MAX_TURNS),
        (ExecResult(0), _trajectory("TimeExceeded"), Termination.AGENT_TIMEOUT),
        (ExecResult(124, timed_out=True), _trajectory(""), Termination.AGENT_TIMEOUT),
        (
            ExecResult(1),
            _trajectory("InternalServerError", "litellm.InternalServerError: OpenAIException - boom"),
            Termination.API_ERROR,
        ),
        (
            ExecResult(1),
            _trajectory("BadRequestError", "litellm.BadRequestError: maximum context length is 8192 tokens"),
            Termination.CONTEXT_OVERFLOW,
        ),
        (ExecResult(1), _trajectory("KeyError", "'command'"), Termination.HARNESS_CRASH),
        (ExecResult(2, stderr="Traceback: no such option"), None, Termination.HARNESS_CRASH),
    ],
    ids=["submitted", "step-limit", "wall-clock", "killed", "api-500", "context", "crash", "no-trajectory"],
)
def test_outcome_mapping(execution: ExecResult, trajectory: dict | None, expected: Termination) -> None:
    result = classify(execution, trajectory)
    assert result.termination == expected
    assert result.reason
    if trajectory is None:
        assert "no such option" in result.reason


def test_transcript_shows_tool_calls_as_commands() -> None:
    call = {"function": {"name": "bash", "arguments": json.dumps({"command": "ls -la"})}}
    text = render_transcript({"messages": [{"role": "assistant", "content": "look", "tool_calls": [call]}]})
    assert text == "[assistant]\nlook\n$ ls -la"


# ---------------------------------------------------------------- end to end (test doubles)


Reply = Callable[[int, dict[str, Any]], tuple[int, dict[str, Any]]]


def bash_call(n: int, command: str) -> tuple[int, dict[str, Any]]:
    function = {"name": "bash", "arguments": json.dumps({"command": command})}
    call = {"id": f"call_{n}", "type": "function", "function": function}
    message = {"role": "assistant", "content": f"Step {n}.", "tool_calls": [call]}
    return 200, {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": "policy",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def trial(tmp_path: Path, reply: Reply, **options: Any) -> tuple[HarnessResult, FakeServer, str]:
    """One run against a scripted OpenAI chat-completions server (JSON, not streamed)."""
    return run_trial(tmp_path, MiniSweAgent(MiniSweAgentOptions(**options)), reply)


@end_to_end()
def test_fixes_the_file_and_submits(tmp_path: Path) -> None:
    def reply(n: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return bash_call(n, FIX if n == 1 else "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")

    result, server, calc = trial(tmp_path, reply)

    first = assert_fixed(result, server, calc, "/s/trial-1/v1/chat/completions")
    assert first["auth"] == "Bearer sk-session"
    assert [t["function"]["name"] for t in first["body"]["tools"]] == ["bash"]
    assert not first["body"].get("stream")
    assert "calc.py" in json.dumps(first["body"]["messages"])
    second = server.requests[1]["body"]["messages"]
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "call_1"
    assert "$ sed -i 's/a - b/a + b/' calc.py" in result.transcript
    assert result.details["api_calls"] == 2


@end_to_end()
def test_step_limit_ends_as_max_turns(tmp_path: Path) -> None:
    result, server, _ = trial(tmp_path, lambda n, body: bash_call(n, "ls"), max_turns=2)

    assert result.termination == Termination.MAX_TURNS, result.reason
    assert len(server.requests) == 2
    assert result.transcript.count("$ ls") == 2


@end_to_end()
def test_server_error_fails_fast_as_api_error(tmp_path: Path) -> None:
    def reply(n: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 500, {"error": {"message": "inference backend is down", "type": "server_error"}}

    result, server, _ = trial(tmp_path, reply)

    assert_failed_fast(result, server)
    assert "inference backend is down" in result.reason


def test_max_turns_defaults_to_the_run_spec() -> None:
    spec = spec_with({"max_turns": 4})
    assert MiniSweAgent(MiniSweAgentOptions(), BuildContext(spec=spec)).max_turns == 4
    assert MiniSweAgent(MiniSweAgentOptions(max_turns=2), BuildContext(spec=spec)).max_turns == 2
