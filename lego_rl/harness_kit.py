"""What harness plugins share: finding their CLI, checking its version, running it in the sandbox,
reading back what it wrote, and the scaffolding of mapping its end onto a :class:`Termination`.

Plain functions; each harness keeps its own command line, config and outcome rules.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import shutil
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lego_rl.data import Termination
from lego_rl.kinds import ExecResult, HarnessResult, Problem, Sandbox
from lego_rl.registry import BuildContext
from lego_rl.spec.load import deep_merge as deep_merge  # a harness's config under the spec's overrides

LOGS = "/logs/agent"
"""Where a harness keeps its instruction, config and output inside the sandbox."""
TAIL = 2000
"""How many trailing characters of an output or error message a reason or transcript keeps."""
CONTEXT_OVERFLOW = re.compile(
    r"ContextWindowExceeded|context[ _](length|window)|maximum context|prompt is too long",
    re.IGNORECASE,
)
"""An error message that says the prompt outgrew the model's context: the policy's length."""
OUTPUT_LIMIT = re.compile(r"max_output_tokens|output token limit", re.IGNORECASE)
"""An error message that says a reply ran to its output-token limit (Codex: ``Incomplete
response returned, reason: max_output_tokens``): the policy's length, told apart from the
context so that a policy that starts repeating itself shows as such."""

Outcome = Callable[[Termination, str], HarnessResult]
"""Makes the result of one execution from a termination and its reason."""


# ---------------------------------------------------------------- the CLI and its version


def find_cli(option: str | None, default: Path, ctx: BuildContext) -> Path | None:
    """The executable: ``default`` (bundled) without the option, a path option relative to the
    spec, else a name looked up on PATH; None if it is not a file."""
    if option is None:
        path = default
    elif "/" in option:
        path = ctx.path(option)
    else:
        found = shutil.which(option)
        path = Path(found) if found else Path(option)
    return path if path.is_file() else None


def cli_missing(name: str, option: str | None, default: Path, install: str) -> Problem:
    """The preflight problem of a CLI that :func:`find_cli` did not find."""
    return Problem(f"{name} CLI not found: {option or default}", install)


def venv_files(venv: Path) -> list[Path]:
    """What a Python CLI in ``venv`` needs inside a sandbox: the venv and the installation its
    interpreter links to (for :class:`~lego_rl.kinds.HarnessFiles`)."""
    python = venv / "bin" / "python"
    base = Path(os.path.realpath(python)).parent.parent if python.exists() else None
    return [venv, *([base] if base is not None and base != venv else [])]


def venv_version(venv: Path, distribution: str) -> str:
    """The version of ``distribution`` installed in the virtualenv ``venv``, or ''."""
    for site in sorted(venv.glob("lib/python*/site-packages")):
        for dist in importlib.metadata.distributions(path=[str(site)]):
            if dist.metadata["Name"] == distribution:
                return dist.version
    return ""


def npm_version(package_dir: Path) -> str:
    """The version in an npm package's package.json, or '' if there is none."""
    try:
        return str(json.loads((package_dir / "package.json").read_text()).get("version", ""))
    except (OSError, ValueError):
        return ""


def untested_version(name: str, installed: str, pinned: str, fix: str) -> list[Problem]:
    """A warning when the installed CLI is not the version the plugin pins and is tested with."""
    if installed == pinned:
        return []
    return [Problem(f"{name} {installed or 'of unknown version'} is installed; this plugin is tested with {pinned}", fix, fatal=False)]


def max_turns(option: int | None, ctx: BuildContext) -> int:
    """The harness's turn limit: its option, else the spec's ``run.max_turns``, else 8."""
    if option is not None:
        return option
    return ctx.spec.run.max_turns if ctx.spec is not None else 8


def command_turns(tool: str, argument: str, commands: list[str], finish: bool = True) -> list[dict[str, Any]]:
    """Conformance policy turns: one ``tool`` call a shell command, then (``finish``) a final text."""
    turns: list[dict[str, Any]] = [{"text": "", "tool_calls": [{"name": tool, "arguments": {argument: c}}]} for c in commands]
    return [*turns, {"text": "Done." if commands else "Nothing to change."}] if finish else turns


# ---------------------------------------------------------------- one run in the sandbox


def elf_interpreter(path: Path) -> str | None:
    """The dynamic loader a 64-bit little-endian ELF executable names (its ``PT_INTERP``), e.g.
    glibc's ``/lib64/ld-linux-x86-64.so.2``; None for a static binary or anything else."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:6] != b"\x7fELF\x02\x01":
                return None
            phoff, phentsize, phnum = struct.unpack_from("<Q", head, 32)[0], *struct.unpack_from("<HH", head, 54)
            for index in range(phnum):
                f.seek(phoff + index * phentsize)
                kind, _, offset, _, _, size = struct.unpack("<IIQQQQ", f.read(40))
                if kind == 3:  # PT_INTERP
                    f.seek(offset)
                    return f.read(size).rstrip(b"\0").decode(errors="replace")
    except (OSError, struct.error):
        return None
    return None


def missing_loader(sandbox: Sandbox, name: str, binary: Path) -> HarnessResult | None:
    """SANDBOX_ERROR naming what is missing when the sandbox lacks the dynamic loader (the C
    library) that the harness's native ``binary`` is linked against; None when it is there or
    the binary needs none."""
    loader = elf_interpreter(binary)
    if loader is None:
        return None
    found = sandbox.exec(f"test -e {shlex.quote(loader)}", timeout=30)
    if found.exit_code == 0:
        return None
    libc = "glibc" if "ld-linux" in loader else "musl" if "musl" in loader else "its C library"
    return HarnessResult(
        Termination.SANDBOX_ERROR, found.exit_code,
        f"the task image has no {loader} ({libc}'s dynamic loader), which {name}'s native binary "
        f"{binary} is linked against: give the task an image with {libc} (e.g. Debian or Ubuntu based "
        "for glibc, not Alpine)",
    )  # fmt: skip


def not_found(name: str, install: str) -> HarnessResult:
    """The result of a run whose CLI is not there."""
    return HarnessResult(Termination.HARNESS_CRASH, reason=f"{name} CLI not found ({install})")


def prepare(sandbox: Sandbox, directory: str, stale: str) -> HarnessResult | None:
    """Create ``directory`` in the sandbox and remove a ``stale`` output; the failed result, or None."""
    prepared = sandbox.exec(f"mkdir -p {directory} && rm -f {stale}", timeout=30)
    if prepared.exit_code == 0:
        return None
    return HarnessResult(Termination.SANDBOX_ERROR, prepared.exit_code, f"cannot create {directory}: {prepared.stderr}")


def run_cli(
    sandbox: Sandbox, command: str, output: str, uploads: dict[str, str], *,
    timeout: float, env: dict[str, str], cwd: str,
) -> tuple[ExecResult, str, float]:
    """Upload ``uploads`` (sandbox path -> text), run ``command`` in the sandbox, read back the
    text file ``output`` ('' if it is missing); the execution, that text and when it started."""
    with tempfile.TemporaryDirectory(prefix="legorl-harness-") as tmp:
        for index, (dst, text) in enumerate(uploads.items()):
            staged = Path(tmp) / f"upload-{index}"
            staged.write_text(text)
            sandbox.upload(staged, dst)
        started = time.monotonic()
        execution = sandbox.exec(command, timeout=timeout, env=env, cwd=cwd)
        return execution, download_text(sandbox, output, Path(tmp) / "output"), started


def download_text(sandbox: Sandbox, src: str, dst: Path) -> str:
    """The text file at src inside the sandbox (through the local ``dst``), or '' if it is missing."""
    try:
        sandbox.download(src, dst)
        return dst.read_text(errors="replace")
    except Exception:  # noqa: BLE001 - a missing file raises whatever the sandbox backend raises
        return ""


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines output; other lines are skipped."""
    objects = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            objects.append(value)
    return objects


def json_object(text: str) -> dict[str, Any] | None:
    """The JSON object in ``text``, or None if it is not one."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def finished(result: HarnessResult, transcript: str, started: float) -> HarnessResult:
    """``result`` with its transcript and the seconds since ``started`` (``time.monotonic``)."""
    result.transcript = transcript
    result.details["seconds"] = round(time.monotonic() - started, 3)
    return result


# ---------------------------------------------------------------- outcome scaffolding


def outcome(execution: ExecResult, details: dict[str, Any]) -> Outcome:
    """A maker of results of ``execution``, each with its exit code and ``details``."""

    def result(termination: Termination, reason: str) -> HarnessResult:
        return HarnessResult(termination, execution.exit_code, reason, details=details)

    return result


def timed_out(name: str, execution: ExecResult, result: Outcome) -> HarnessResult | None:
    """AGENT_TIMEOUT when the sandbox killed the run at its timeout, else None."""
    if not execution.timed_out:
        return None
    return result(Termination.AGENT_TIMEOUT, f"{name} ran past {execution.seconds:.0f} s")


def crash_reason(what: str, execution: ExecResult) -> str:
    """``what`` went wrong, then the tail of what the process printed (stderr, else stdout)."""
    said = (execution.stderr or execution.stdout)[-TAIL:].strip()
    return f"{what}\n{said}".strip()


def api_failure(message: str) -> Termination:
    """OUTPUT_LIMIT or CONTEXT_OVERFLOW for a model API error that says a reply hit its output
    limit or the context overflowed, else API_ERROR."""
    if OUTPUT_LIMIT.search(message):
        return Termination.OUTPUT_LIMIT
    return Termination.CONTEXT_OVERFLOW if CONTEXT_OVERFLOW.search(message) else Termination.API_ERROR
