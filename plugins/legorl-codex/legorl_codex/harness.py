"""The Codex harness: its unmodified native CLI (``codex exec``) run inside the sandbox.

One run writes a ``config.toml`` (a custom model provider on the proxy session; see
:mod:`legorl_codex.config`) into its own ``CODEX_HOME`` under ``/logs/agent``, starts
``codex exec --json`` in the task repository with the instruction on stdin, and reads back
the JSONL events it printed. Codex has no turn limit of its own: the proxy session's call
limit (the spec's ``run.max_turns``) ends a run that goes on too long.
"""

from __future__ import annotations

import platform
import shlex
from pathlib import Path
from typing import Any

from lego_rl import harness_kit as kit
from lego_rl.kinds import Endpoint, HarnessResult, Problem, Sandbox, Task
from lego_rl.registry import BuildContext
from legorl_codex.config import KEY_ENV, build_config, to_toml
from legorl_codex.options import CodexOptions
from legorl_codex.outcome import classify, render_transcript

VERSION = "0.171.0"
DIST_DIR = Path(__file__).resolve().parents[1]
"""The distribution directory: its package.json pins the CLI, ``npm ci`` installs it here."""
LOGS = kit.LOGS
CODEX_HOME = f"{LOGS}/codex-home"
INSTRUCTION_FILE = f"{LOGS}/instruction.md"
BASE_INSTRUCTIONS_FILE = f"{CODEX_HOME}/instructions.md"
"""Where ``options.instructions`` goes (Codex's ``model_instructions_file``)."""
EVENTS_FILE = f"{LOGS}/codex.jsonl"
INSTALL = (
    f"install @openai/codex@{VERSION} with the project's setup (scripts/setup.sh runs "
    f"`npm ci` in {DIST_DIR}), or set harness.options.command to a `codex` executable"
)
FLAGS = ("--skip-git-repo-check", "--json", "--dangerously-bypass-approvals-and-sandbox")
"""No git repository needed, JSONL events on stdout, no approvals or own sandbox (ours is)."""


def vendor_dir(root: Path = DIST_DIR) -> Path:
    """Where npm puts the native CLI of this platform (an optional dependency of the package)."""
    arch = {"x86_64": ("x64", "x86_64"), "aarch64": ("arm64", "aarch64"), "arm64": ("arm64", "aarch64")}
    npm_arch, triple_arch = arch.get(platform.machine(), (platform.machine(), platform.machine()))
    package = root / "node_modules" / "@openai" / f"codex-linux-{npm_arch}"
    return package / "vendor" / f"{triple_arch}-unknown-linux-musl"


class Codex:
    """Codex (`codex exec --json`) against the proxy's OpenAI Responses API."""

    dialect = "openai-responses"

    def __init__(self, options: CodexOptions, ctx: BuildContext | None = None):
        self.options = options
        self.ctx = ctx or BuildContext()

    def command_path(self) -> Path | None:
        """The absolute path of the `codex` executable, or None if it is not there."""
        return kit.find_cli(self.options.command, vendor_dir() / "bin" / "codex", self.ctx)

    def sandbox_files(self) -> list[Path]:
        """The native CLI's directory (the binary and its bundled helpers, e.g. ripgrep)."""
        codex = self.command_path()
        return [codex.parent.parent if self.options.command is None else codex.parent] if codex else []

    def preflight(self) -> list[Problem]:
        if self.command_path() is None:
            return [kit.cli_missing("Codex", self.options.command, vendor_dir() / "bin" / "codex", INSTALL)]
        if self.options.command is None:
            installed = kit.npm_version(DIST_DIR / "node_modules" / "@openai" / "codex")
            return kit.untested_version("Codex", installed, VERSION, f"run `npm ci` in {DIST_DIR}")
        return []

    def conformance_script(self, commands: list[str]) -> list[dict[str, Any]]:
        """The policy turns that run each shell command with ``exec_command``, then finish."""
        return kit.command_turns("exec_command", "cmd", commands)

    def run(self, sandbox: Sandbox, task: Task, endpoint: Endpoint, timeout: float) -> HarnessResult:
        timeout = self.options.timeout or timeout
        codex = self.command_path()
        if codex is None:
            return kit.not_found("Codex", INSTALL)
        if (failed := kit.missing_loader(sandbox, "Codex", codex)) is not None:
            return failed
        if (failed := kit.prepare(sandbox, CODEX_HOME, EVENTS_FILE)) is not None:
            return failed
        context = self.ctx.spec.model.max_context if self.ctx.spec is not None else None
        settings = build_config(self.options, endpoint, timeout, context)
        uploads = {INSTRUCTION_FILE: task.instruction}
        if self.options.instructions is not None:
            uploads[BASE_INSTRUCTIONS_FILE] = self.options.instructions
            settings.setdefault("model_instructions_file", BASE_INSTRUCTIONS_FILE)
        uploads[f"{CODEX_HOME}/config.toml"] = to_toml(settings) + "\n"
        execution, output, started = kit.run_cli(
            sandbox, self.command_line(codex, sandbox.workdir), EVENTS_FILE, uploads,
            timeout=timeout,
            env={"CODEX_HOME": CODEX_HOME, KEY_ENV: endpoint.api_key, **self.options.extra_env},
            cwd=sandbox.workdir,
        )
        events = kit.json_lines(output)
        return kit.finished(classify(execution, events), render_transcript(events), started)

    def command_line(self, codex: Path, workdir: str) -> str:
        """``codex exec`` with the instruction on stdin (``-``) and the events into /logs/agent;
        its bundled helpers (ripgrep) first on PATH, as its npm launcher does."""
        argv = [str(codex), "exec", *FLAGS, "-C", workdir, *self.options.extra_args, "-"]
        helpers = shlex.quote(str(codex.parent.parent / "codex-path"))
        return f'PATH={helpers}:"$PATH" {shlex.join(argv)} <{INSTRUCTION_FILE} >{EVENTS_FILE}'

