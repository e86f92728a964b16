"""The Claude Code harness: its unmodified native CLI run inside the sandbox.

One run uploads the task's instruction into ``/logs/agent``, starts ``claude -p`` in the task
repository with the instruction on stdin, the model API pointed at the proxy session and
non-essential traffic off, and reads back the stream-json events it wrote.
"""

from __future__ import annotations

import platform
import shlex
from pathlib import Path
from typing import Any

from lego_rl import harness_kit as kit
from lego_rl.kinds import Endpoint, HarnessResult, Problem, Sandbox, Task
from lego_rl.registry import BuildContext
from legorl_claude_code.options import ClaudeCodeOptions
from legorl_claude_code.outcome import classify, render_transcript

VERSION = "2.1.332"
DIST_DIR = Path(__file__).resolve().parents[1]
"""The distribution directory: its package.json pins the CLI, ``npm ci`` installs it here."""
LOGS = kit.LOGS
INSTRUCTION_FILE = f"{LOGS}/instruction.md"
EVENTS_FILE = f"{LOGS}/claude-code.jsonl"
INSTALL = (
    f"install @anthropic-ai/claude-code@{VERSION} with the project's setup (scripts/setup.sh runs "
    f"`npm ci` in {DIST_DIR}), or set harness.options.command to a `claude` executable"
)
ENV = {
    "IS_SANDBOX": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}
"""Root may skip permissions inside a sandbox; no telemetry, error reports, auto-update or
other calls than the model API."""


def native_binary(root: Path = DIST_DIR) -> Path:
    """Where npm puts the native CLI of this platform (an optional dependency of the package)."""
    arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), platform.machine())
    musl = "-musl" if not platform.libc_ver()[0] else ""
    return root / "node_modules" / "@anthropic-ai" / f"claude-code-linux-{arch}{musl}" / "claude"


class ClaudeCode:
    """Claude Code (`claude -p`, stream-json) against the proxy's Anthropic messages API."""

    dialect = "anthropic-messages"

    def __init__(self, options: ClaudeCodeOptions, ctx: BuildContext | None = None):
        self.options = options
        self.ctx = ctx or BuildContext()

    @property
    def max_turns(self) -> int:
        """The option, else the spec's ``run.max_turns``."""
        return kit.max_turns(self.options.max_turns, self.ctx)

    @property
    def max_tokens(self) -> int | None:
        """The spec's per-call token limit, which Claude Code then asks for (not its 32k)."""
        return self.ctx.spec.run.max_tokens if self.ctx.spec is not None else None

    def command_path(self) -> Path | None:
        """The absolute path of the `claude` executable, or None if it is not there."""
        return kit.find_cli(self.options.command, native_binary(), self.ctx)

    def sandbox_files(self) -> list[Path]:
        """The directory of the native CLI (a self-contained binary)."""
        claude = self.command_path()
        return [claude.parent] if claude else []

    def preflight(self) -> list[Problem]:
        if self.command_path() is None:
            return [kit.cli_missing("Claude Code", self.options.command, native_binary(), INSTALL)]
        if self.options.command is None:
            installed = kit.npm_version(native_binary().parent)
            wanted = self.options.version
            if wanted is not None and not _matches(installed, wanted):
                return [
                    Problem(
                        f"the spec wants Claude Code {wanted}, but {installed or 'an unknown version'} is installed",
                        f"set harness.options.version to {VERSION!r} (this plugin's pin), or point "
                        "harness.options.command at a `claude` of that version",
                    )
                ]
            return kit.untested_version("Claude Code", installed, VERSION, f"run `npm ci` in {DIST_DIR}")
        return []

    def conformance_script(self, commands: list[str]) -> list[dict[str, Any]]:
        """The policy turns that run each shell command with the Bash tool, then finish."""
        return kit.command_turns("Bash", "command", commands)

    def run(self, sandbox: Sandbox, task: Task, endpoint: Endpoint, timeout: float) -> HarnessResult:
        timeout = self.options.timeout or timeout
        claude = self.command_path()
        if claude is None:
            return kit.not_found("Claude Code", INSTALL)
        if (failed := kit.missing_loader(sandbox, "Claude Code", claude)) is not None:
            return failed
        if (failed := kit.prepare(sandbox, LOGS, EVENTS_FILE)) is not None:
            return failed
        execution, output, started = kit.run_cli(
            sandbox, self.command_line(claude), EVENTS_FILE, {INSTRUCTION_FILE: task.instruction},
            timeout=timeout,
            env={**ENV, **self.model_env(endpoint, timeout), **self.options.extra_env},
            cwd=sandbox.workdir,
        )
        events = kit.json_lines(output)
        return kit.finished(classify(execution, events), render_transcript(events), started)
    def model_env(self, endpoint: Endpoint, timeout: float) -> dict[str, str]:
        """The model API, model names, retries and output limit, for the proxy session."""
        small = endpoint.small_model or endpoint.model
        return {
            "ANTHROPIC_BASE_URL": endpoint.base_url,
            "ANTHROPIC_API_KEY": endpoint.api_key,
            "ANTHROPIC_MODEL": endpoint.model,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": endpoint.model,
            "ANTHROPIC_DEFAULT_SONNET_MODEL": endpoint.model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": small,
            "ANTHROPIC_SMALL_FAST_MODEL": small,
            "CLAUDE_CODE_MAX_RETRIES": str(self.options.retries),
            **({"CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(self.max_tokens)} if self.max_tokens else {}),
            "API_TIMEOUT_MS": str(int(timeout * 1000)),
        }

    def command_line(self, claude: Path) -> str:
        """``claude -p`` with the instruction on stdin and the events into /logs/agent."""
        argv = [
            str(claude), "-p", "--output-format", "stream-json", "--verbose",
            "--max-turns", str(self.max_turns), "--dangerously-skip-permissions",
        ]  # fmt: skip
        if self.options.bare:
            argv.append("--bare")
        if self.options.tools is not None:
            argv += ["--tools", ",".join(self.options.tools)]
        argv += self.options.extra_args
        return f"{shlex.join(argv)} <{INSTRUCTION_FILE} >{EVENTS_FILE}"


def _matches(installed: str, wanted: str) -> bool:
    """Whether a version is ``wanted`` itself or one of its releases (``2.1`` -> ``2.1.x``)."""
    return installed == wanted or installed.startswith(wanted.rstrip(".") + ".")

