"""Resource limits of a local trial: ``prlimit`` per command, a cgroup per trial.

Per-command limits (CPU time, address space, file size, open files) are rlimits; ``nproc``
counts every process of the sandbox's user, and the local sandbox gives each trial its own
user id, so a fork bomb exhausts only its own trial's budget. The task's declared memory
and CPUs (task.toml ``[environment] memory_mb`` / ``cpus``) and the process count are
enforced for the whole trial by a :class:`TrialCgroup` where a writable cgroup hierarchy
(v2, else v1) offers the controller; its event counters tell the sandbox when a limit was
hit. Without one, memory falls back to the address-space rlimit and CPUs to an affinity mask.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

MB = 1 << 20
CPU_GRACE_SECONDS = 5
"""The CPU-time hard limit (SIGKILL) comes this long after the soft one (SIGXCPU)."""
SIGNALLED_BY_LIMIT = {128 + signal.SIGXCPU: "cpu_seconds", 128 + signal.SIGXFSZ: "file_size_mb"}
"""Exit codes of a command killed by an rlimit's signal, and the limit it names."""
DISK_FULL = re.compile(r"Disk quota exceeded|No space left on device")
"""What a command that ran into a storage quota prints (EDQUOT, ENOSPC)."""
CFS_PERIOD_US = 100_000
CGROUP_PREFIX = "legorl-trial-"


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cpu_seconds: int | None = Field(default=3600, gt=0, description="CPU time per process (RLIMIT_CPU).")
    address_space_mb: int | None = Field(
        default=8192,
        gt=0,
        description="Virtual memory per process (RLIMIT_AS); null for runtimes that reserve "
        "large address ranges (e.g. Node).",
    )
    nproc: int | None = Field(default=512, gt=0, description="Processes of the trial's user (RLIMIT_NPROC).")
    file_size_mb: int | None = Field(default=1024, gt=0, description="Largest file a process may write (RLIMIT_FSIZE).")
    open_files: int | None = Field(default=4096, gt=0, description="Open file descriptors per process (RLIMIT_NOFILE).")

    def prlimit_args(self, address_space_mb: int | None = None) -> list[str]:
        """``prlimit`` options for the set limits, e.g. ``["--cpu=60:65"]``: soft = hard but
        for CPU time, whose soft limit sends SIGXCPU first (so its exit code names it).
        ``address_space_mb`` lowers the address-space limit (a task's memory, no cgroup)."""
        space = min(v for v in (self.address_space_mb, address_space_mb) if v) if (
            self.address_space_mb or address_space_mb
        ) else None
        cpu = self.cpu_seconds and f"{self.cpu_seconds}:{self.cpu_seconds + CPU_GRACE_SECONDS}"
        pairs = (
            ("cpu", cpu),
            ("as", space and space * MB),
            ("nproc", self.nproc),
            ("fsize", self.file_size_mb and self.file_size_mb * MB),
            ("nofile", self.open_files),
        )
        return [f"--{name}={value}" for name, value in pairs if value]

    def signalled(self, exit_code: int) -> str | None:
        """``"cpu_seconds=60"`` when ``exit_code`` is a command killed by an rlimit's signal."""
        name = SIGNALLED_BY_LIMIT.get(exit_code)
        value = getattr(self, name) if name else None
        return f"{name}={value}" if value else None



class LimitLog:
    """The limits a trial's commands ran into (what ``resources_exhausted`` lists): each limit
    at most once per phase, with the detail of its first hit. Every sandbox backend reads its
    own evidence (an exit status, stderr, cgroup counters) and records it here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[dict[str, str]] = []
        self._counts: dict[str, int] = {}

    def record(self, phase: str, found: Iterable[tuple[str, str]]) -> None:
        """Record (limit, detail) pairs hit in ``phase`` (``agent`` or ``verify``)."""
        with self._lock:
            for limit, detail in found:
                if not any(e["phase"] == phase and e["limit"] == limit for e in self._events):
                    self._events.append({"phase": phase, "limit": limit, "detail": detail})

    def events(self) -> list[dict[str, str]]:
        """``phase``, ``limit`` (its name and value, e.g. ``memory_mb=64``) and ``detail``."""
        with self._lock:
            return list(self._events)

    @staticmethod
    def signalled(limits: Limits | None, exit_code: int | None) -> list[tuple[str, str]]:
        """The rlimit whose signal killed a command that exited with ``exit_code``."""
        limit = limits.signalled(exit_code) if limits is not None and exit_code is not None else None
        return [(limit, f"a command was killed by signal {exit_code - 128}")] if limit and exit_code else []

    def counted(
        self, counts: Mapping[str, int], values: Mapping[str, float | None], scope: str = ""
    ) -> list[tuple[str, str]]:
        """The counters of limits hit (``memory_mb``: OOM kills, ``nproc``: refused forks, as a
        cgroup counts them) that grew since the last look at the same ``scope`` (one container
        or cgroup); ``values`` gives each limit's value for its name."""
        found = []
        with self._lock:
            for name, count in counts.items():
                key = f"{scope}:{name}"
                grew, self._counts[key] = count - self._counts.get(key, 0), count
                if grew > 0:
                    what = ("OOM kill", "OOM kills") if name == "memory_mb" else ("fork refused", "forks refused")
                    found.append((limit_label(name, values.get(name)), f"{grew} {what[grew > 1]}"))
        return found


def limit_label(name: str, value: float | None) -> str:
    """How a hit limit is named: ``memory_mb=64``, or its name alone when its value is unknown."""
    return f"{name}={value:g}" if value else name


# ---------------------------------------------------------------- cgroups

_V2 = {"memory": "memory.max", "pids": "pids.max", "cpu": "cpu.max"}
_V1 = {"memory": "memory.limit_in_bytes", "pids": "pids.max", "cpu": "cpu.cfs_quota_us"}


def cgroup_parents() -> dict[str, tuple[Path, bool]]:
    """controller -> (this process's own cgroup dir, is v2) for memory, pids and cpu, where
    a writable hierarchy offers it (v2 where its controller is enabled for children)."""
    found: dict[str, tuple[Path, bool]] = {}
    mounts = _cgroup_mounts()
    for line in _read("/proc/self/cgroup").splitlines():
        _id, names, path = line.split(":", 2)
        if names == "" and "" in mounts:  # the v2 hierarchy
            own = mounts[""] / path.lstrip("/")
            enabled = _read(own / "cgroup.subtree_control").split()
            for name in _V2:
                if name in enabled and os.access(own, os.W_OK):
                    found.setdefault(name, (own, True))
            continue
        for name in names.split(","):
            if name in _V1 and name in mounts and name not in found:
                own = mounts[name] / path.lstrip("/")
                if os.access(own, os.W_OK):
                    found[name] = (own, False)
    return found


@dataclass
class TrialCgroup:
    """One trial's cgroup: a dir per controller (one hierarchy each in v1)."""

    dirs: dict[str, tuple[Path, bool]]
    """controller -> (dir, is v2)"""
    values: dict[str, float]
    """controller -> the limit set (MB, processes, CPUs)"""

    @classmethod
    def create(cls, name: str, *, memory_mb: float | None, cpus: float | None, nproc: int | None) -> TrialCgroup:
        """Make ``name`` under our own cgroup for each wanted controller the host offers."""
        wanted = {"memory": memory_mb, "pids": nproc, "cpu": cpus}
        made = cls({}, {})
        try:
            for controller, (parent, v2) in cgroup_parents().items():
                value = wanted[controller]
                if not value:
                    continue
                path = parent / name
                path.mkdir(exist_ok=True)
                made.dirs[controller] = (path, v2)
                made._set(controller, path, v2, value)
                made.values[controller] = value
        except BaseException:
            made.remove()
            raise
        return made

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a command's first process joins (one per hierarchy)."""
        return sorted({str(path / "cgroup.procs") for path, _v2 in self.dirs.values()})

    def exhausted(self) -> dict[str, int]:
        """Limit name -> how often it was hit: ``memory_mb`` (OOM kills), ``nproc`` (forks refused)."""
        counts: dict[str, int] = {}
        if "memory" in self.dirs:
            path, v2 = self.dirs["memory"]
            counts["memory_mb"] = _counter(path / ("memory.events" if v2 else "memory.oom_control"), "oom_kill")
        if "pids" in self.dirs:
            counts["nproc"] = _counter(self.dirs["pids"][0] / "pids.events", "max")
        return {k: v for k, v in counts.items() if v}

    def kill(self) -> None:
        """SIGKILL every process in the trial's cgroups."""
        for path, _v2 in self.dirs.values():
            for pid in _read(path / "cgroup.procs").split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)

    def remove(self, wait: float = 2.0) -> None:
        """Kill what is left and remove the dirs (a dying PID namespace needs a moment)."""
        deadline = time.monotonic() + wait
        for controller, (path, _v2) in list(self.dirs.items()):
            while True:
                self.kill()
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
            del self.dirs[controller]

    def _set(self, controller: str, path: Path, v2: bool, value: float) -> None:
        if controller == "memory":
            _write(path / _V2["memory"] if v2 else path / _V1["memory"], str(int(value) * MB))
            swap = path / ("memory.swap.max" if v2 else "memory.memsw.limit_in_bytes")
            if swap.exists():  # no swapping past the limit either
                _write(swap, "0" if v2 else str(int(value) * MB))
        elif controller == "pids":
            _write(path / "pids.max", str(int(value)))
        elif v2:
            _write(path / "cpu.max", f"{int(value * CFS_PERIOD_US)} {CFS_PERIOD_US}")
        else:
            _write(path / "cpu.cfs_period_us", str(CFS_PERIOD_US))
            _write(path / "cpu.cfs_quota_us", str(int(value * CFS_PERIOD_US)))


def cgroup_name(trial_id: str) -> str:
    """The cgroup of a trial of this process (the pid lets a later one sweep it)."""
    return f"{CGROUP_PREFIX}{os.getpid()}-{trial_id}"


def sweep_cgroups() -> None:
    """Remove trial cgroups left by processes that died without cleaning up (kill -9)."""
    for parent, v2 in set(cgroup_parents().values()):
        with contextlib.suppress(OSError):
            for entry in parent.iterdir():
                owner = entry.name.removeprefix(CGROUP_PREFIX).split("-", 1)[0]
                if entry.name.startswith(CGROUP_PREFIX) and owner.isdigit() and not _alive(int(owner)):
                    with contextlib.suppress(OSError):
                        TrialCgroup({"any": (entry, v2)}, {}).remove(wait=0.5)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cpu_mask(cpus: float, slot: int) -> list[int]:
    """``ceil(cpus)`` of the CPUs we may use, the ``slot``-th such group (round robin)."""
    allowed = sorted(os.sched_getaffinity(0))
    count = min(len(allowed), max(1, int(-(-cpus // 1))))
    return [allowed[(slot * count + i) % len(allowed)] for i in range(count)]


def _cgroup_mounts() -> dict[str, Path]:
    """controller -> mount point of its v1 hierarchy; "" -> the v2 mount point."""
    mounts: dict[str, Path] = {}
    for line in _read("/proc/self/mountinfo").splitlines():
        left, _sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(tail) < 3 or fields[3] != "/" or "rw" not in fields[5].split(","):
            continue
        if tail[0] == "cgroup2":
            mounts.setdefault("", Path(fields[4]))
        elif tail[0] == "cgroup":
            for name in tail[2].split(","):
                mounts.setdefault(name, Path(fields[4]))
    return mounts


def _counter(path: Path, key: str) -> int:
    for line in _read(path).splitlines():
        name, _sep, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _write(path: Path, text: str) -> None:
    path.write_text(text)
