"""Sandbox ``local``: one trial in a bubblewrap sandbox on this machine (the embedded default).

The task's Dockerfile is materialised by :mod:`legorl_std.dockerfile` into a per-trial
directory ``<root>/<trial>/fs`` (a path ``/x`` inside is ``fs/x`` on the host); its mount
points, ``/logs`` and ``$HOME`` (``/home/agent``) are bound read-write over a read-only view
of the host root, so the host's interpreters and the project venv are usable inside.
Every ``exec`` is a fresh ``bwrap``: private PID/IPC/UTS namespaces, private ``/tmp``, and
the run directory, the trials root and the task's own files (tests, solution) hidden under
empty tmpfs. The environment is clean (PATH, HOME, LANG, the Dockerfile's ENV, the caller's
env), handed over as bwrap's process environment rather than ``--setenv`` so that values
never appear in a command line. When the command ends or times out, the whole process tree
dies with the PID namespace.

The host root is rebuilt entry by entry (``root_view_args``) rather than ``--ro-bind / /``:
a read-only ``/`` leaves bwrap no place to create mount points such as ``/app``.

Not yet (the isolation issue adds them in ``_bwrap_argv``/``start``): a network namespace
(the network is the host's, so ``endpoint_url`` returns the host URL unchanged), overlayfs
snapshots, rlimits, anti-cheat hooks.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field

from lego_rl import hookimpl
from lego_rl.kinds import ExecResult, Problem, Task
from lego_rl.registry import BuildContext
from legorl_std.dockerfile import Image, materialise

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOME = "/home/agent"
LOGS = "/logs"
LOG_DIRS = ("agent", "verifier", "artifacts")
OUTPUT_CAP = 1 << 20
"""Bytes of stdout and of stderr kept per exec (the tail)."""
TIMEOUT_EXIT = 124
"""Exit code reported for a command killed at its timeout (as GNU timeout)."""
_OWN_MOUNTS = frozenset({"dev", "proc", "tmp"})
"""Top-level dirs the sandbox mounts itself instead of viewing the host's."""
BWRAP_MISSING = Problem(
    "the local sandbox needs bubblewrap (bwrap)", "install it: apt-get install bubblewrap"
)
_TRIAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class SandboxError(RuntimeError):
    """The sandbox could not be built or used (infrastructure, not the policy)."""


class LocalSandboxOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    root: str | None = Field(
        default=None,
        description="Directory of per-trial dirs (default: <run dir>/trials, or a temp dir).",
    )
    keep: bool = Field(default=True, description="Keep each trial dir after stop (for audit).")
    bwrap: str = Field(default="bwrap", description="The bubblewrap executable.")


class LocalSandboxBackend:
    """Starts trials in bubblewrap; construction touches nothing on disk."""

    def __init__(self, options: LocalSandboxOptions, ctx: BuildContext):
        self.options = options
        self._run_dir = ctx.run_dir.absolute() if ctx.run_dir else None
        self._root = ctx.path(options.root).absolute() if options.root else None
        if self._root is None and self._run_dir is not None:
            self._root = self._run_dir / "trials"
        self._lock = threading.Lock()

    @property
    def root(self) -> Path:
        with self._lock:
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="legorl-trials-"))
            return self._root

    def preflight(self) -> list[Problem]:
        path = shutil.which(self.options.bwrap)
        if path is None:
            return [BWRAP_MISSING]
        probe = subprocess.run(
            [path, "--ro-bind", "/", "/", "--unshare-pid", "--die-with-parent", "true"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        if probe.returncode != 0:
            return [
                Problem(
                    f"bubblewrap ({path}) cannot create a sandbox here: {probe.stderr.strip()}",
                    "run as root, or allow unprivileged user namespaces "
                    "(sysctl kernel.unprivileged_userns_clone=1)",
                )
            ]
        return []

    def start(self, task: Task, trial_id: str) -> LocalSandbox:
        if not _TRIAL_ID.match(trial_id):
            raise SandboxError(f"trial id {trial_id!r} must be a plain file name ([A-Za-z0-9._-])")
        dockerfile = task.path / "environment" / "Dockerfile"
        if not dockerfile.is_file():
            raise SandboxError(
                f"task {task.name}: {dockerfile} is missing (the local sandbox builds from it)"
            )
        bwrap = shutil.which(self.options.bwrap)
        if bwrap is None:
            raise SandboxError(str(BWRAP_MISSING))
        trial_dir = self.root / trial_id
        try:
            trial_dir.mkdir(parents=True)
        except FileExistsError:
            raise SandboxError(f"trial dir {trial_dir} exists already; trial ids must be unique") from None
        try:
            image = materialise(dockerfile, trial_dir / "fs", {"PATH": DEFAULT_PATH})
        except BaseException:
            shutil.rmtree(trial_dir, ignore_errors=True)
            raise
        hidden = [self.root, task.path] + ([self._run_dir] if self._run_dir else [])
        sandbox = LocalSandbox(bwrap, trial_dir, image, hidden, keep=self.options.keep)
        (trial_dir / "sandbox.json").write_text(json.dumps(sandbox.describe(task), indent=2) + "\n")
        return sandbox


class LocalSandbox:
    """One started trial. Paths inside that persist between execs live under ``fs``."""

    def __init__(self, bwrap: str, trial_dir: Path, image: Image, hidden: list[Path], *, keep: bool):
        self.workdir = image.workdir
        self.trial_dir = trial_dir
        self.fs = trial_dir / "fs"
        self.image = image
        self._bwrap = bwrap
        self._keep = keep
        self._hidden = _outermost([Path(os.path.realpath(p)) for p in hidden])
        self._env = {"PATH": DEFAULT_PATH, "HOME": HOME, "LANG": "C.UTF-8", **image.env}
        self._mounts: list[str] = []
        self._live: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        for point in [*image.mount_points, LOGS, HOME]:
            self._add_mount(point)
        for name in LOG_DIRS:
            self.host_path(f"{LOGS}/{name}").mkdir(parents=True, exist_ok=True)
        self.host_path(HOME).mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ Sandbox protocol

    def exec(
        self,
        command: str,
        *,
        timeout: float,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        inside_cwd = self._inside(cwd or self.workdir)
        argv = [self._bwrap, *self._bwrap_argv(inside_cwd), "--", "bash", "-c", command]
        clean_env = {**self._env, **(env or {})}  # via the process env, so values never show in ps
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            start = time.monotonic()
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=clean_env,
                start_new_session=True,
            )
            with self._lock:
                self._live.add(proc)
            timed_out = False
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                code = TIMEOUT_EXIT
            finally:
                _kill_group(proc)
                with self._lock:
                    self._live.discard(proc)
            seconds = time.monotonic() - start
            stdout, stderr = _tail(out), _tail(err)
        if code < 0:
            code = 128 - code
        if code == 1 and stderr.startswith("bwrap: "):
            raise SandboxError(f"bubblewrap could not set up trial {self.trial_dir.name}: {stderr.strip()}")
        return ExecResult(code, stdout, stderr, timed_out, seconds)

    def upload(self, src: Path, dst: str) -> None:
        """Copy a host file/dir so it appears at ``dst`` inside (from the next exec on)."""
        src = Path(src)
        if not src.exists():
            raise FileNotFoundError(f"upload source {src} does not exist")
        inside = self._inside(dst)
        if inside == "/" or inside.split("/")[1] in ("dev", "proc"):
            raise SandboxError(f"cannot upload to {inside} in the local sandbox")
        self._add_mount(inside)
        target = self.host_path(inside)
        if src.is_dir():
            shutil.copytree(src, target, symlinks=True, dirs_exist_ok=True)
            return
        if target.is_dir():
            raise IsADirectoryError(f"upload of file {src} to {inside}: a directory exists there")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)

    def download(self, src: str, dst: Path) -> None:
        """Copy ``src`` (inside) to the host path ``dst`` (a file's new path or a dir's)."""
        inside = self._inside(src)
        if not self._covered(inside):
            raise FileNotFoundError(
                f"{inside} is not kept between commands in the local sandbox "
                f"(only {', '.join(self._mounts)} are)"
            )
        source = self.host_path(inside)
        if not source.exists():
            raise FileNotFoundError(
                f"{inside} does not exist in the sandbox of trial {self.trial_dir.name}"
            )
        dst = Path(dst)
        if source.is_dir():
            shutil.copytree(source, dst, symlinks=True, dirs_exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dst)

    def endpoint_url(self, host_url: str) -> str:
        """Unchanged: the sandbox shares the host network (no net namespace yet)."""
        return host_url

    def stop(self) -> None:
        """Kill whatever still runs; drop the trial dir unless ``keep`` (the default)."""
        with self._lock:
            live = list(self._live)
        for proc in live:
            _kill_group(proc)
        if not self._keep:
            shutil.rmtree(self.trial_dir, ignore_errors=True)

    # ------------------------------------------------------------------ paths and mounts

    def host_path(self, inside: str) -> Path:
        """The host path behind an in-sandbox path (which must not escape the trial)."""
        inside = self._inside(inside)
        path = self.fs / inside.lstrip("/")
        if not Path(os.path.realpath(path)).is_relative_to(os.path.realpath(self.fs)):
            raise SandboxError(f"{inside} resolves outside the trial's files (a symlink?)")
        return path

    def describe(self, task: Task) -> dict[str, Any]:
        return {
            "task": task.name,
            "task_path": str(task.path),
            "base_image": self.image.base,
            "workdir": self.workdir,
            "env": self.image.env,
            "mounts": self._mounts,
        }

    def _inside(self, path: str) -> str:
        joined = posixpath.normpath(posixpath.join(self.workdir, path))
        return "/" + joined.lstrip("/")

    def _covered(self, inside: str) -> bool:
        return any(inside == m or inside.startswith(m + "/") for m in self._mounts)

    def _add_mount(self, inside: str) -> None:
        with self._lock:
            if not self._covered(inside):
                self._mounts.append(inside)

    def _bwrap_argv(self, cwd: str) -> list[str]:
        argv = [*root_view_args(self._mounts), "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for path in self._hidden:
            if path.exists() and not _under_own_mount(str(path)):
                argv += ["--tmpfs", str(path), "--remount-ro", str(path)]
        for point in sorted(self._mounts, key=lambda m: m.count("/")):
            argv += ["--bind", str(self.fs / point.lstrip("/")), point]
        return [
            *argv,
            "--remount-ro", "/",
            "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--die-with-parent", "--new-session",
            "--chdir", cwd,
        ]  # fmt: skip


def root_view_args(targets: list[str]) -> list[str]:
    """bwrap args that show the host root read-only, with room for every mount target.

    A target whose path does not exist on the host needs writable parents to create its
    mount point in, so its nearest existing ancestors are rebuilt as directories whose
    children are bound one by one; everything else is one read-only bind per entry.
    """
    rebuilt = {"/"}
    for target in targets:
        if _under_own_mount(target):
            continue
        real = posixpath.join(os.path.realpath(posixpath.dirname(target)), posixpath.basename(target))
        if os.path.lexists(real):
            continue
        parent = posixpath.dirname(real)
        while not os.path.isdir(parent):
            parent = posixpath.dirname(parent)
        while parent != "/":
            rebuilt.add(parent)
            parent = posixpath.dirname(parent)
    args: list[str] = []
    _replicate("/", rebuilt, args)
    return args


def _replicate(directory: str, rebuilt: set[str], args: list[str]) -> None:
    with os.scandir(directory) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if directory == "/" and entry.name in _OWN_MOUNTS:
                continue
            if entry.is_symlink():
                args += ["--symlink", os.readlink(entry.path), entry.path]
            elif entry.path in rebuilt:
                args += ["--dir", entry.path]
                _replicate(entry.path, rebuilt, args)
            elif entry.is_dir() or entry.is_file():
                args += ["--ro-bind", entry.path, entry.path]


def _under_own_mount(path: str) -> bool:
    return path.lstrip("/").split("/")[0] in _OWN_MOUNTS


def _outermost(paths: list[Path]) -> list[Path]:
    """Drop paths inside another one of the list (one tmpfs over the outer hides both)."""
    unique = sorted(set(paths), key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in unique:
        if not any(path.is_relative_to(k) for k in kept):
            kept.append(path)
    return kept


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL bwrap's process group; the sandbox's PID namespace dies with it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _tail(stream: IO[bytes]) -> str:
    size = stream.seek(0, os.SEEK_END)
    stream.seek(max(0, size - OUTPUT_CAP))
    text = stream.read().decode("utf-8", errors="replace")
    return f"[... {size - OUTPUT_CAP} bytes cut ...]\n{text}" if size > OUTPUT_CAP else text


def build(options: LocalSandboxOptions, ctx: BuildContext) -> LocalSandboxBackend:
    """Bubblewrap sandbox on this machine (read-only host root, per-trial files)."""
    return LocalSandboxBackend(options, ctx)


@hookimpl
def legorl_register_sandbox(register: Any) -> None:
    register("local", build, options=LocalSandboxOptions)
