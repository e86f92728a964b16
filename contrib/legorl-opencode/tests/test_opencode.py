"""The OpenCode harness: registration, config, command line, outcome mapping from JSON events
that OpenCode 1.18.33 printed (tests/events, recorded against local fake servers), the example
spec, and the real CLI end to end through the proxy (the kit's harness contracts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from legorl_opencode import OpenCode, OpenCodeOptions, harness
from legorl_opencode.config import build_config
from legorl_opencode.harness import ENV, native_binary
from legorl_opencode.outcome import classify, render_transcript

from lego_rl.data import Termination
from lego_rl.kinds import Endpoint, ExecResult, Task, first_fatal
from lego_rl.registry import default_registry

ROOT = Path(__file__).resolve().parents[1]
EVENTS = Path(__file__).parent / "events"
SPEC = ROOT / "specs" / "opencode-local.yaml"
ENDPOINT = Endpoint("http://127.0.0.1:1/s/trial-1", "sk-session", "policy", "policy-small")


def recorded(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (EVENTS / f"{name}.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------- registration, preflight


def test_registered_through_its_entry_point() -> None:
    info = default_registry().get("harness", "opencode")
    assert info.distribution == "legorl-opencode" and info.factory.dialect == "openai-chat"
    with pytest.raises(ValueError, match="retries"):
        default_registry().options("harness", "opencode", {"retries": 3})


@pytest.mark.parametrize("command", ["/nonexistent/bin/opencode", "no-such-opencode-program"])
def test_preflight_names_the_missing_cli_and_the_install(command: str) -> None:
    problem = first_fatal(OpenCode(OpenCodeOptions(command=command)).preflight())
    assert problem is not None and command in problem.message
    assert "opencode-ai@1.18.33" in problem.fix and "npm ci --ignore-scripts" in problem.fix


@pytest.mark.parametrize(
    ("machine", "libc", "avx2", "packages"),
    [
        ("x86_64", "glibc", True, ["opencode-linux-x64", "opencode-linux-x64-baseline"]),
        ("x86_64", "glibc", False, ["opencode-linux-x64-baseline", "opencode-linux-x64"]),
        ("x86_64", "", True, ["opencode-linux-x64-musl", "opencode-linux-x64-baseline-musl"]),
        ("aarch64", "glibc", True, ["opencode-linux-arm64"]),
    ],
)
def test_native_binary_is_the_platform_build_npm_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: str, libc: str, avx2: bool, packages: list[str]
) -> None:
    monkeypatch.setattr(harness.platform, "machine", lambda: machine)
    monkeypatch.setattr(harness.platform, "libc_ver", lambda: (libc, "2.36"))
    monkeypatch.setattr(harness, "_has_avx2", lambda: avx2)
    binaries = [tmp_path / "node_modules" / p / "bin" / "opencode" for p in packages]
    assert native_binary(tmp_path) == binaries[0], "none installed: the preferred one, for the error"
    binaries[-1].parent.mkdir(parents=True)
    binaries[-1].write_text("")
    assert native_binary(tmp_path) == binaries[-1]


# ---------------------------------------------------------------- config, command line


def test_config_points_an_openai_compatible_provider_at_the_proxy() -> None:
    options = OpenCodeOptions(config={"agent": {"build": {"temperature": 0.2}}, "snapshot": True})
    config = build_config(options, ENDPOINT, timeout=90, limit={"context": 8192, "output": 256})
    provider = config["provider"]["legorl"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"]["baseURL"] == "http://127.0.0.1:1/s/trial-1/v1"
    assert provider["options"]["apiKey"] == "{env:LEGORL_API_KEY}", "the key stays out of the file"
    assert provider["options"]["chunkTimeout"] == provider["options"]["headerTimeout"] == 90_000
    assert provider["models"]["policy"]["limit"] == {"context": 8192, "output": 256}
    assert provider["models"]["policy-small"]["name"] == "policy-small"
    assert config["model"] == "legorl/policy" and config["small_model"] == "legorl/policy-small"
    assert config["enabled_providers"] == ["legorl"] and config["share"] == "disabled"
    assert config["lsp"] is False and config["formatter"] is False
    assert config["agent"] == {"build": {"temperature": 0.2}} and config["snapshot"] is True


def test_command_line_names_the_session_so_no_title_call_is_made() -> None:
    task = Task(name="fix-add", path=Path("/t"), instruction="Fix it.")
    line = OpenCode(OpenCodeOptions(agent="plan", extra_args=["--variant", "low"])).command_line(Path("/o/opencode"), task)
    assert line == (
        'OPENCODE_CONFIG_CONTENT="$(cat /logs/agent/opencode/opencode.json)" '
        "/o/opencode run --format json --auto --agent plan --title fix-add --variant low "
        "</logs/agent/instruction.md >/logs/agent/opencode.jsonl"
    )
    assert all(ENV[f"XDG_{k}_HOME"].startswith("/logs/agent/opencode/") for k in ("CONFIG", "DATA", "STATE", "CACHE"))


def test_conformance_script_runs_commands_with_bash_then_finishes() -> None:
    turns = OpenCode(OpenCodeOptions()).conformance_script(["ls"])
    assert turns == [{"text": "", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]}, {"text": "Done."}]


# ---------------------------------------------------------------- outcome mapping (recorded events)


def test_completed_run() -> None:
    result = classify(ExecResult(0), recorded("completed"))
    assert result.termination == Termination.COMPLETED and result.reason == "OpenCode finished (stop)"
    assert result.details["steps"] == 3 and result.details["tool_calls"] == 2 and result.details["finish"] == "stop"
    assert result.details["session_id"].startswith("ses_")


@pytest.mark.parametrize(
    ("name", "expected", "said"),
    [
        ("call_limit", Termination.API_ERROR, "model API error 400: session contract-harness-1 reached its limit"),
        ("server_error", Termination.API_ERROR, "model API error 500: backend failed: CUDA out of memory"),
        ("context_overflow", Termination.CONTEXT_OVERFLOW, "ContextOverflowError: this model's maximum context length"),
    ],
)
def test_failed_run(name: str, expected: Termination, said: str) -> None:
    result = classify(ExecResult(1), recorded(name))
    assert result.termination == expected and result.reason.startswith(said)
    assert result.exit_code == 1


def test_timeout_wins_over_what_was_printed() -> None:
    result = classify(ExecResult(124, timed_out=True, seconds=61), recorded("completed")[:2])
    assert result.termination == Termination.AGENT_TIMEOUT and "61 s" in result.reason


def test_crash_reason_keeps_the_error_without_colour_codes() -> None:
    stderr = '\x1b[91m\x1b[1mError: \x1b[0mConfiguration is invalid at /logs/agent/opencode/opencode.json\n↳ Expected boolean | undefined, got "x" snapshot'
    result = classify(ExecResult(1, stderr=stderr), [])
    assert result.termination == Termination.HARNESS_CRASH
    assert result.reason.startswith("OpenCode exited with code 1 before a step finished\nError: Configuration is invalid")
    assert "\x1b" not in result.reason


def test_unknown_session_error_is_a_crash() -> None:
    events = [{"type": "error", "error": {"name": "UnknownError", "data": {"message": "boom"}}}]
    result = classify(ExecResult(1), events)
    assert result.termination == Termination.HARNESS_CRASH and result.reason == "OpenCode failed (UnknownError): boom"


def test_transcript_shows_commands_tool_errors_and_the_end() -> None:
    transcript = render_transcript(recorded("completed"))
    assert transcript == (
        "$ echo hi && ls\nhi\n\n"
        '[tool read] {"filePath": "/nonexistent/file.txt"}\n[error] File not found: /nonexistent/file.txt\n\n'
        "[assistant]\nDone.\n\n[finish] stop"
    )
    assert render_transcript(recorded("call_limit")).startswith("[error] APIError: session contract-harness-1")


# ---------------------------------------------------------------- the example spec


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    cli = [sys.executable, "-m", "lego_rl.cli.main", "validate", str(path)]
    return subprocess.run(cli, check=False, capture_output=True, text=True, timeout=120)


def test_example_spec_validates() -> None:
    checked = validate(SPEC)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (SPEC.parent / yaml.safe_load(SPEC.read_text())["tasks"]["options"]["path"]).is_dir()


def test_validation_rejects_an_unknown_option(tmp_path: Path) -> None:
    spec = yaml.safe_load(SPEC.read_text())
    spec["harness"]["options"] = {"max_turns": 3}
    spec["tasks"]["options"]["path"] = str((SPEC.parent / spec["tasks"]["options"]["path"]).resolve())
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    checked = validate(tmp_path / "spec.yaml")
    assert checked.returncode == 2 and "max_turns" in checked.stdout + checked.stderr


# ---------------------------------------------------------------- the real CLI through the proxy


@pytest.mark.slow
@pytest.mark.legorl_plugin("harness", "opencode")
def test_contract(legorl_contract) -> None:
    """Each harness contract of the kit: structure, preflight, the scripted policy solving
    fix-add through the proxy (reward 1, one call per turn) and doing nothing (reward 0)."""
    legorl_contract()
