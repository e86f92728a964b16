"""A container's processes as the host sees them (``/proc``): who its init is, which processes
a ``docker exec`` started, what each left behind, and killing them.

In a container, a ``docker exec``'s process is a child of the container's shim (outside the
container), like the init; a process whose parent died is re-parented to the nearest
*subreaper* inside, else to the init. Our exec wrapper makes every command a subreaper, so
while it runs, everything it started stays in its tree; the init's children besides itself
are then exactly what ended commands left behind.
"""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import time
from collections.abc import Callable, Iterable

KILL_ROUNDS = 50
"""Kill-and-look-again rounds (a fork bomb refills the tree while it is being killed)."""


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (every thread's)."""
    found: list[int] = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        with contextlib.suppress(OSError), open(path) as f:
            found += [int(p) for p in f.read().split()]
    return found


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants, parents first."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        if alive(current):
            found.append(current)
            todo += children(current)
    return found


def nspid(pid: int) -> list[int]:
    """The pid of ``pid`` in each PID namespace, the host's first (``NSpid``)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(p) for p in line.split()[1:]]
    except OSError:
        pass
    return []


def parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def alive(pid: int) -> bool:
    """Running (not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def start_time(pid: int) -> int:
    """Clock ticks after boot when ``pid`` started (tells a reused pid apart)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return -1


PF_EXITING = 0x4


def running(pid: int, started: int) -> bool:
    """Whether ``pid`` (started at ``started`` ticks) still runs: not gone, reused, a zombie, or
    exiting (the kernel marks it so before it kills the rest of its PID namespace)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    try:
        return int(fields[19]) == started and fields[0] not in ("Z", "X", "x") and not int(fields[6]) & PF_EXITING
    except (IndexError, ValueError):
        return False


def pidns(pid: int) -> str:
    """``pid``'s PID namespace ('' when it is gone)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def exec_root(shim: int, ns: str, inner: int) -> int | None:
    """The host pid of the process that is ``inner`` in the container's namespace ``ns``: a
    child of the shim, or (while ``runc exec`` hands it over) a grandchild."""
    level = [shim]
    for _ in range(3):
        level = [c for p in level for c in children(p)]
        for pid in level:
            ids = nspid(pid)
            if ids and ids[-1] == inner and len(ids) > 1 and pidns(pid) == ns:
                return pid
    return None


def commands(shim: int, init: int, ns: str) -> list[int]:
    """The roots of the commands running in the container (the shim's children in ``ns``)."""
    return [p for p in children(shim) if p != init and pidns(p) == ns]


def leftovers(init: int, keep: set[int]) -> list[int]:
    """What ended commands left: the init's descendants, but for the trees of ``keep``
    (commands still running, re-parented to the init only if their own root died)."""
    found = []
    for pid in children(init):
        if pid not in keep:
            found += tree(pid)
    return found


def kill_trees(collect: Callable[[], Iterable[int]], settle: float = 5.0) -> int:
    """SIGKILL what ``collect()`` returns until it returns nothing (or ``settle`` seconds
    pass); how many were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + settle
    for _ in range(KILL_ROUNDS):
        pids = [p for p in collect() if alive(p)]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        if time.monotonic() > deadline:
            break
        time.sleep(0.002)
    return len(killed)


def wait_exit(pid: int, timeout: float) -> bool:
    """Block until ``pid`` exits (True) or ``timeout`` passes (False), on a pidfd."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # gone already (or no pidfds): poll
        deadline = time.monotonic() + timeout
        while alive(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True
    try:
        import select

        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(max(0, int(timeout * 1000))))
    finally:
        os.close(fd)
