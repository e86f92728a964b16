"""The OpenCode harness: its unmodified native CLI (``opencode run``) run inside the sandbox.

One run writes an ``opencode.json`` (a custom OpenAI-compatible provider on the proxy
session; see :mod:`legorl_opencode.config`) under ``/logs/agent/opencode``, where OpenCode
also keeps its data, state and cache (XDG directories), starts ``opencode run --format json``
in the task repository with the instruction on stdin, and reads back the JSON events it
printed. ``--title`` names the session, so OpenCode makes no title-generation call: every
model call is the agent's. OpenCode's ``steps`` limit only asks the model to stop (it goes on
while the model calls tools), so the proxy session's call limit (the spec's ``run.max_turns``)
ends a run that goes on too long.
"""

from __future__ import annotations

import json
import platform
import shlex
from pathlib import Path
from typing import Any

from lego_rl import harness_kit as kit
from lego_rl.kinds import Endpoint, HarnessResult, Problem, Sandbox, Task
from lego_rl.registry import BuildContext
from legorl_opencode.config import KEY_ENV, build_config
from legorl_opencode.options import OpenCodeOptions
from legorl_opencode.outcome import classify, render_transcript

VERSION = "1.18.33"
DIST_DIR = Path(__file__).resolve().parents[1]
"""The distribution directory: its package.json pins the CLI, ``npm ci`` installs it here."""
LOGS = kit.LOGS
HOME = f"{LOGS}/opencode"
CONFIG_FILE = f"{HOME}/opencode.json"
INSTRUCTION_FILE = f"{LOGS}/instruction.md"
EVENTS_FILE = f"{LOGS}/opencode.jsonl"
INSTALL = (
    f"install opencode-ai@{VERSION} with `npm ci --ignore-scripts` in {DIST_DIR}, "
    "or set harness.options.command to an `opencode` executable"
)
SHELL_TOOL = ("bash", "command")
"""OpenCode's shell tool and its argument for the command."""
ENV = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    **{f"XDG_{kind.upper()}_HOME": f"{HOME}/{kind}" for kind in ("config", "data", "state", "cache")},
}
"""No fetches of models.dev, updates or LSP servers; all of OpenCode's files (its session
database, logs) under /logs/agent/opencode."""


def native_binary(root: Path = DIST_DIR) -> Path:
    """The native CLI of this platform that npm put into node_modules (an optional dependency
    of opencode-ai), in the order its postinstall prefers: baseline x64 builds without AVX2."""
    names = _package_names()
    binaries = [root / "node_modules" / name / "bin" / "opencode" for name in names]
    return next((b for b in binaries if b.is_file()), binaries[0])


def _package_names() -> list[str]:
    arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), platform.machine())
    musl = "-musl" if not platform.libc_ver()[0] else ""
    fast = f"opencode-linux-{arch}{musl}"
    if arch != "x64":
        return [fast]
    baseline = f"opencode-linux-x64-baseline{musl}"
    return [fast, baseline] if _has_avx2() else [baseline, fast]


def _has_avx2() -> bool:
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


class OpenCode:
    """OpenCode (`opencode run --format json`) against the proxy's OpenAI chat completions API."""

    dialect = "openai-chat"

    def __init__(self, options: OpenCodeOptions, ctx: BuildContext | None = None):
        self.options = options
        self.ctx = ctx or BuildContext()

    def command_path(self) -> Path | None:
        """The absolute path of the `opencode` executable, or None if it is not there."""
        return kit.find_cli(self.options.command, native_binary(), self.ctx)

    def sandbox_files(self) -> list[Path]:
        """The directory of the native CLI (a self-contained binary)."""
        opencode = self.command_path()
        return [opencode.parent] if opencode else []

    def preflight(self) -> list[Problem]:
        if self.command_path() is None:
            return [kit.cli_missing("OpenCode", self.options.command, native_binary(), INSTALL)]
        if self.options.command is None:
            installed = kit.npm_version(DIST_DIR / "node_modules" / "opencode-ai")
            return kit.untested_version("OpenCode", installed, VERSION, f"run `npm ci --ignore-scripts` in {DIST_DIR}")
        return []

    def conformance_script(self, commands: list[str]) -> list[dict[str, Any]]:
        """The policy turns that run each shell command with the ``bash`` tool, then finish."""
        return kit.command_turns(*SHELL_TOOL, commands)

    def run(self, sandbox: Sandbox, task: Task, endpoint: Endpoint, timeout: float) -> HarnessResult:
        timeout = self.options.timeout or timeout
        opencode = self.command_path()
        if opencode is None:
            return kit.not_found("OpenCode", INSTALL)
        if (failed := kit.prepare(sandbox, HOME, EVENTS_FILE)) is not None:
            return failed
        config = json.dumps(build_config(self.options, endpoint, timeout, self.model_limit()), indent=2)
        execution, output, started = kit.run_cli(
            sandbox, self.command_line(opencode, task), EVENTS_FILE,
            {INSTRUCTION_FILE: task.instruction, CONFIG_FILE: config + "\n"},
            timeout=timeout,
            env={**ENV, KEY_ENV: endpoint.api_key, **self.options.extra_env},
            cwd=sandbox.workdir,
        )  # fmt: skip
        events = kit.json_lines(output)
        return kit.finished(classify(execution, events), render_transcript(events), started)

    def model_limit(self) -> dict[str, int] | None:
        """The spec's context and per-call completion tokens, as OpenCode's model ``limit``."""
        spec = self.ctx.spec
        return None if spec is None else {"context": spec.model.max_context, "output": spec.run.max_tokens}

    def command_line(self, opencode: Path, task: Task) -> str:
        """``opencode run`` with the instruction on stdin and the events into /logs/agent. Our
        config comes as ``OPENCODE_CONFIG_CONTENT``, which OpenCode merges last: the task
        repository's own opencode.json and AGENTS.md still apply, but cannot change the model."""
        argv = [
            str(opencode), "run", "--format", "json", "--auto", "--agent", self.options.agent,
            "--title", task.name, *self.options.extra_args,
        ]  # fmt: skip
        config = f'OPENCODE_CONFIG_CONTENT="$(cat {CONFIG_FILE})"'
        return f"{config} {shlex.join(argv)} <{INSTRUCTION_FILE} >{EVENTS_FILE}"
