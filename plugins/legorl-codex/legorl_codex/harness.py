"""The Codex harness: its unmodified native CLI (``codex exec``) run inside the sandbox.

One run writes a ``config.toml`` (a custom model provider on the proxy session; see
:mod:`legorl_codex.config`) into its own ``CODEX_HOME`` under ``/logs/agent``, starts
``codex exec --json`` in the task repository with the instruction on stdin, and reads back
the JSONL events it printed. Codex has no turn limit of its own: the proxy session's call
limit (the spec's ``run.max_turns``) ends a run that goes on too long.
"""

from __future__ import annotations

import json
import platform
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from lego_rl.data import Termination
from lego_rl.kinds import Endpoint, HarnessResult, Problem, Sandbox, Task
from lego_rl.registry import BuildContext
from legorl_codex.config import KEY_ENV, build_config, to_toml
from legorl_codex.options import CodexOptions
from legorl_codex.outcome import classify, parse_events, render_transcript

VERSION = "0.171.0"
DIST_DIR = Path(__file__).resolve().parents[1]
"""The distribution directory: its package.json pins the CLI, ``npm ci`` installs it here."""
LOGS = "/logs/agent"
CODEX_HOME = f"{LOGS}/codex-home"
INSTRUCTION_FILE = f"{LOGS}/instruction.md"
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
        raw = self.options.command
        if raw is None:
            path = vendor_dir() / "bin" / "codex"
        elif "/" in raw:
            path = self.ctx.path(raw)
        else:
            found = shutil.which(raw)
            path = Path(found) if found else Path(raw)
        return path if path.is_file() else None

    def preflight(self) -> list[Problem]:
        if self.command_path() is None:
            where = self.options.command or str(vendor_dir() / "bin" / "codex")
            return [Problem(f"Codex CLI not found: {where}", INSTALL)]
        if self.options.command is None:
            installed = _package_version(DIST_DIR / "node_modules" / "@openai" / "codex")
            if installed != VERSION:
                return [
                    Problem(
                        f"Codex {installed or 'of unknown version'} is installed; this plugin is tested with {VERSION}",
                        f"run `npm ci` in {DIST_DIR}",
                        fatal=False,
                    )
                ]
        return []

    def conformance_script(self, commands: list[str]) -> list[dict[str, Any]]:
        """The policy turns that run each shell command with ``exec_command``, then finish."""
        turns: list[dict[str, Any]] = [
            {"text": "", "tool_calls": [{"name": "exec_command", "arguments": {"cmd": c}}]} for c in commands
        ]
        return [*turns, {"text": "Done." if commands else "Nothing to change."}]

    def run(self, sandbox: Sandbox, task: Task, endpoint: Endpoint, timeout: float) -> HarnessResult:
        timeout = self.options.timeout or timeout
        codex = self.command_path()
        if codex is None:
            return HarnessResult(Termination.HARNESS_CRASH, reason=f"Codex CLI not found ({INSTALL})")
        prepared = sandbox.exec(f"mkdir -p {CODEX_HOME} && rm -f {EVENTS_FILE}", timeout=30)
        if prepared.exit_code != 0:
            return HarnessResult(
                Termination.SANDBOX_ERROR, prepared.exit_code, f"cannot create {CODEX_HOME}: {prepared.stderr}"
            )
        context = self.ctx.spec.model.max_context if self.ctx.spec is not None else None
        with tempfile.TemporaryDirectory(prefix="legorl-codex-") as tmp:
            local = Path(tmp)
            (local / "instruction.md").write_text(task.instruction)
            (local / "config.toml").write_text(to_toml(build_config(self.options, endpoint, timeout, context)) + "\n")
            sandbox.upload(local / "instruction.md", INSTRUCTION_FILE)
            sandbox.upload(local / "config.toml", f"{CODEX_HOME}/config.toml")
            started = time.monotonic()
            execution = sandbox.exec(
                self.command_line(codex, sandbox.workdir),
                timeout=timeout,
                env={"CODEX_HOME": CODEX_HOME, KEY_ENV: endpoint.api_key, **self.options.extra_env},
                cwd=sandbox.workdir,
            )
            events = parse_events(_download_text(sandbox, EVENTS_FILE, local / "events.jsonl"))
        result = classify(execution, events)
        result.transcript = render_transcript(events)
        result.details["seconds"] = round(time.monotonic() - started, 3)
        return result

    def command_line(self, codex: Path, workdir: str) -> str:
        """``codex exec`` with the instruction on stdin (``-``) and the events into /logs/agent;
        its bundled helpers (ripgrep) first on PATH, as its npm launcher does."""
        argv = [str(codex), "exec", *FLAGS, "-C", workdir, *self.options.extra_args, "-"]
        helpers = shlex.quote(str(codex.parent.parent / "codex-path"))
        quoted = " ".join(shlex.quote(part) for part in argv)
        return f'PATH={helpers}:"$PATH" {quoted} <{INSTRUCTION_FILE} >{EVENTS_FILE}'


def _package_version(package_dir: Path) -> str:
    try:
        return str(json.loads((package_dir / "package.json").read_text()).get("version", ""))
    except (OSError, ValueError):
        return ""


def _download_text(sandbox: Sandbox, src: str, dst: Path) -> str:
    """The text file at src inside the sandbox, or '' if it is missing."""
    try:
        sandbox.download(src, dst)
        return dst.read_text(errors="replace")
    except Exception:  # noqa: BLE001 - a missing file raises whatever the sandbox backend raises
        return ""
