"""One sandbox command as a host process: waiting on it, killing its group, keeping the tail of
its output. Shared by the sandboxes that run a process per command (bubblewrap, docker's CLI)."""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import subprocess
from collections.abc import Iterator, Sequence
from typing import IO

OUTPUT_CAP = 1 << 20
"""Bytes of stdout and of stderr kept per exec (the tail)."""
TIMEOUT_EXIT = 124
"""Exit code reported for a command killed at its timeout (as GNU timeout)."""


def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """The exit code, or None if ``proc`` still runs after ``timeout`` seconds.

    Blocks on a pidfd: ``Popen.wait(timeout)`` polls with growing sleeps, which added ~9 ms to
    a 25 ms command (a trial runs several: harness set-up and run, anti-cheat, verifier)."""
    try:
        fd = os.pidfd_open(proc.pid)
    except OSError:  # no pidfd (kernel < 5.3): the polling wait
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        ready = poller.poll(min(max(0, math.ceil(timeout * 1000)), 2**31 - 1))
    finally:
        os.close(fd)
    return proc.wait() if ready else None


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``proc``'s process group (it leads one: ``start_new_session``) and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def tail(stream: IO[bytes]) -> str:
    """The last :data:`OUTPUT_CAP` bytes written to ``stream`` as text, saying how much was cut."""
    size = stream.seek(0, os.SEEK_END)
    stream.seek(max(0, size - OUTPUT_CAP))
    text = stream.read().decode("utf-8", errors="replace")
    return f"[... {size - OUTPUT_CAP} bytes cut ...]\n{text}" if size > OUTPUT_CAP else text


@contextlib.contextmanager
def closing(fds: Sequence[tuple[int, str]]) -> Iterator[None]:
    """Close the (descriptor, name) pairs' descriptors when the block ends."""
    try:
        yield
    finally:
        for fd, _ in fds:
            os.close(fd)
