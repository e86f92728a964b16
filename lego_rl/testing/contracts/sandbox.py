"""Sandbox contracts: commands run with their exit codes, files go in and out, timeouts stop
commands (they are not waited for), the harness can reach the proxy, and resource limits hold.

The isolation and red-team contracts live in :mod:`lego_rl.testing.contracts.sandbox_isolation`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lego_rl.kinds import ExecResult, Sandbox, Task
from lego_rl.testing.contracts.base import (
    ContractEnv,
    contract,
    expect,
    no_fatal_problems,
    problems,
    satisfies_protocol,
)

STORAGE_MB = 64
"""``[environment] storage_mb`` of the task the limit and red-team contracts run in."""
SETTLE_S = 3.0
"""How long processes of a stopped command may take to go (a PID namespace dies asynchronously)."""
FLOOD_MB = 32


@contextmanager
def started(backend: Any, env: ContractEnv, trial_id: str, task: Task | None = None) -> Iterator[Sandbox]:
    """A sandbox of ``task`` (the kit's fix-add by default), stopped afterwards whatever happens."""
    no_fatal_problems(backend)
    sandbox = backend.start(task or env.task(), trial_id)
    try:
        yield sandbox
    finally:
        sandbox.stop()


def storage_task(env: ContractEnv, storage_mb: int = STORAGE_MB) -> Task:
    """The kit's fix-add task, declaring ``[environment] storage_mb`` (Harbor's disk limit)."""
    task = env.task()
    environment = {**task.config.get("environment", {}), "storage_mb": storage_mb}
    return task.model_copy(update={"config": {**task.config, "environment": environment}})


def host_processes(token: str, settle: float = SETTLE_S) -> list[int]:
    """Pids of processes on this host whose command line carries ``token``, once they had
    ``settle`` seconds to go; empty where /proc does not exist."""
    needle = token.encode()
    deadline = time.monotonic() + settle
    while True:
        found = []
        for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
            if entry.isdigit():
                with contextlib.suppress(OSError), open(f"/proc/{entry}/cmdline", "rb") as f:
                    if needle in f.read():
                        found.append(int(entry))
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


def brief(out: ExecResult) -> str:
    """An exec result in one line: exit code, timeout, the ends of its output."""
    timed_out = " (timed out)" if out.timed_out else ""
    return f"exit {out.exit_code}{timed_out}, stdout {out.stdout[-300:]!r}, stderr {out.stderr[-300:]!r}"


def no_leftovers(token: str, what: str) -> None:
    """Fail (after killing them) if processes carrying ``token`` outlived ``what``."""
    left = host_processes(token)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    expect(
        not left,
        f"{len(left)} processes started by {what} still ran on the host {SETTLE_S:.0f} s after "
        f"exec returned (pids {left[:5]}, killed by the kit): stop the command's whole process "
        "tree with SIGKILL at its timeout (its process group, or its PID namespace)",
    )


@contract("sandbox", "structure")
def structure(backend: Any, env: ContractEnv) -> None:
    """it has the SandboxBackend shape and its sandboxes the Sandbox shape"""
    satisfies_protocol(backend, "sandbox")
    problems(backend)


@contract("sandbox", "preflight")
def preflight(backend: Any, env: ContractEnv) -> None:
    """preflight finds everything the backend needs"""
    no_fatal_problems(backend)


@contract("sandbox", "exec")
def runs_commands(backend: Any, env: ContractEnv) -> None:
    """commands run in the task's working directory with their output and exit code"""
    with started(backend, env, "contract-exec") as sandbox:
        expect(isinstance(sandbox, Sandbox), f"start() returned {type(sandbox).__name__}, not a Sandbox")
        out = sandbox.exec("echo hello", timeout=30)
        expect(out.exit_code == 0 and out.stdout.strip() == "hello", f"echo failed: {out}")
        expect(sandbox.exec("exit 3", timeout=30).exit_code == 3, "exit code not propagated")
        out = sandbox.exec("test -f calc.py && pwd", timeout=30)
        expect(out.exit_code == 0, f"the task's files are not in the working directory: {out}")
        out = sandbox.exec("echo $LEGORL_CONTRACT", timeout=30, env={"LEGORL_CONTRACT": "set"})
        expect(out.stdout.strip() == "set", f"exec(env=...) not passed to the command: {out}")
        # a command is run as given, byte for byte: a patch with CRLF lines in a here-document
        out = sandbox.exec("od -An -tx1 <<'END'\r\na\r\nEND\r\n", timeout=30)
        expect(out.stdout.split() == ["61", "0d", "0a"], f"the command's CR characters were changed: {out}")


@contract("sandbox", "file-transfer")
def transfers_files(backend: Any, env: ContractEnv) -> None:
    """upload puts a host file inside, download brings one back, byte for byte"""
    with started(backend, env, "contract-files") as sandbox:
        src = env.tmp / "upload.bin"
        src.write_bytes(bytes(range(256)) * 4)
        sandbox.upload(src, "/tests/upload.bin")
        out = sandbox.exec("wc -c < /tests/upload.bin", timeout=30)
        expect(out.stdout.strip() == "1024", f"upload not visible inside: {out}")
        sandbox.exec(f"echo made > {sandbox.workdir}/made.txt", timeout=30)
        dst = env.tmp / "made.txt"
        sandbox.download(f"{sandbox.workdir}/made.txt", dst)
        expect(dst.read_text() == "made\n", "download did not return the file")


@contract("sandbox", "timeouts")
def times_out(backend: Any, env: ContractEnv) -> None:
    """a command past its timeout is stopped, not waited for, and reported as timed out"""
    with started(backend, env, "contract-timeout") as sandbox:
        # what the command prints once its sleep ends shows whether it was stopped or waited for,
        # whatever the machine's load (no clock is read here)
        out = sandbox.exec("echo started; sleep 30; echo finished", timeout=1)
        expect(out.timed_out, "a command past its timeout must report timed_out")
        expect("finished" not in out.stdout, "the timeout did not stop the command: it ran to its end")
        after = sandbox.exec("echo alive", timeout=30)
        expect(after.stdout.strip() == "alive", f"the sandbox does not run commands after a timeout: {after}")
        expect(sandbox.exec("echo alive", timeout=30).exit_code == 0, "sandbox unusable after a timeout")


@contract("sandbox", "endpoint")
def gives_endpoint(backend: Any, env: ContractEnv) -> None:
    """endpoint_url maps a proxy URL on the host to one reachable from inside"""
    with started(backend, env, "contract-endpoint") as sandbox:
        url = sandbox.endpoint_url("http://127.0.0.1:9/s/x")
        expect(url.startswith("http"), f"endpoint_url must return a URL, got {url!r}")


@contract("sandbox", "limits")
def limits(backend: Any, env: ContractEnv) -> None:
    """a timed-out command's whole process tree stops, output floods return, the task's storage_mb holds"""
    with started(backend, env, "contract-limits", storage_task(env)) as sandbox:
        _stops_the_process_tree(sandbox)
        _returns_from_output_floods(sandbox)
        _holds_declared_storage(sandbox)
        out = sandbox.exec("echo alive", timeout=30)
        expect(
            out.stdout.strip() == "alive",
            f"the sandbox no longer runs commands after the limit checks: {brief(out)}",
        )


def _stops_the_process_tree(sandbox: Sandbox) -> None:
    token = f"legorl-contract-{secrets.token_hex(6)}"
    command = f"for i in 1 2 3; do (trap '' HUP INT TERM; exec -a {token} sleep 60) & done; sleep 60; echo finished"
    out = sandbox.exec(command, timeout=1)
    expect(
        out.timed_out and "finished" not in out.stdout,
        f"a command with background children, timeout 1 s, must be stopped (not waited for): {brief(out)}",
    )
    no_leftovers(token, "a timed-out command (background children ignoring SIGHUP/SIGTERM)")


def _returns_from_output_floods(sandbox: Sandbox) -> None:
    start = time.monotonic()
    out = sandbox.exec(f"head -c {FLOOD_MB}M /dev/zero | tr '\\0' x", timeout=60)
    took = time.monotonic() - start
    expect(
        out.exit_code == 0 and not out.timed_out and out.stdout.rstrip().endswith("x" * 64),
        f"a command printing {FLOOD_MB} MB must complete (exit 0, its output or its tail kept); "
        f"got exit {out.exit_code}, timed_out={out.timed_out}, {len(out.stdout)} chars after {took:.1f} s",
    )
    out = sandbox.exec("while :; do echo legorl-flood; done", timeout=1)  # never ends by itself
    expect(
        out.timed_out,
        f"a command printing without end, timeout 1 s, must be stopped and reported timed out; "
        f"timed_out={out.timed_out} (read output to a file or a bounded buffer while waiting, not "
        "only after the command ends)",
    )


def _holds_declared_storage(sandbox: Sandbox) -> None:
    want = 4 * STORAGE_MB
    out = sandbox.exec(
        f"head -c {want}M /dev/zero > legorl-fill; wc -c < legorl-fill; rm -f legorl-fill", timeout=60
    )
    lines = out.stdout.split()
    written = int(lines[-1]) if lines and lines[-1].isdigit() else -1
    expect(written >= 0, f"could not measure what a command wrote in {sandbox.workdir}: {brief(out)}")
    expect(
        written < want << 20,
        f"the task declares [environment] storage_mb = {STORAGE_MB}, but a command wrote "
        f"{written >> 20} MB into {sandbox.workdir}: cap the trial's writable storage at the "
        "task's storage_mb (the local sandbox: a size-capped tmpfs under its overlay)",
    )
    out = sandbox.exec("echo ok > legorl-after && cat legorl-after && rm legorl-after", timeout=30)
    expect(
        out.stdout.strip() == "ok",
        f"the sandbox cannot write again after its storage filled up: {brief(out)}",
    )
