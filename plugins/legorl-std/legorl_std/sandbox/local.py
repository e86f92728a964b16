"""Sandbox ``local``: one trial in a bubblewrap sandbox on this machine (the embedded default).

The task's Dockerfile is materialised once into a shared read-only image directory
(:mod:`legorl_std.sandbox.snapshot`); each trial sees it through an overlayfs whose upper
layer is a size-capped tmpfs, mounted at ``<root>/<trial>/fs`` (a path ``/x`` inside is
``fs/x`` on the host). Its mount points, ``/logs`` and ``$HOME`` (``/home/agent``) are bound
read-write into a view built from parts (:mod:`legorl_std.sandbox.view`): the system base
(``/usr``, ``/etc``, the library dirs), the paths ``options.expose`` names and, in the agent
phase, the harness's own files (:meth:`LocalSandbox.provide`), all read-only; nothing else of
the host exists inside (no checkout, run dir, task dir or home, not this process's interpreter
and the packages installed with it: a newer release of the very project a task is about may
be among them).

Every ``exec`` is a fresh ``bwrap``: private mount/PID/IPC/UTS namespaces, a network
namespace with loopback only, a private ``/tmp``. As root, the command runs as the trial's
own user id (group ``uid_base``), without capabilities, under ``prlimit`` resource limits;
the whole process tree dies with the PID namespace when the command ends or times out.
The agent reaches the proxy through :mod:`legorl_std.sandbox.netforward`: agent-phase commands join
the trial's own loopback-only network namespace, where our process listens on
``127.0.0.1:<proxy port>`` and relays to the proxy (without root: the host network).

Resources (:mod:`legorl_std.sandbox.limits`): as root each trial gets its own cgroups
(task.toml ``memory_mb`` and ``cpus``, the process limit), which every command joins; the
limits its commands run into (OOM kills, refused forks, a full writable layer, a file cut
at the size limit, SIGXCPU/SIGXFSZ) are listed by :meth:`LocalSandbox.resources_exhausted`,
which the trial runner turns into ``resource_limit``. A backend's first start unmounts the
overlays of trials whose live lock no process holds (a ``kill -9``'d run's) and removes
dead processes' cgroups.

Phases: :meth:`LocalSandbox.begin_verify` ends the agent phase: it kills what runs, records
the agent's diff from the upper layer, and moves the trial to a fresh overlay of the same
image with only the agent's crossing changes applied (:mod:`lego_rl.crossing`,
:mod:`legorl_std.sandbox.verify`), a fresh ``/logs`` and ``$HOME`` and no harness files; from
then on commands get the network the task declares (task.toml ``[environment] network_mode =
"public"``, else none) and no proxy. :meth:`LocalSandbox.exec_reporting` gives a command a
result stream that nothing inside can open by path (a host file passed as a descriptor).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import itertools
import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

import legorl_std.sandbox.netforward as netforward
from lego_rl import hookimpl
from lego_rl.crossing import CrossingLimit, CrossingPolicy
from lego_rl.kinds import RESULTS_FD_ENV, ExecResult, Problem, Task
from lego_rl.registry import BuildContext
from legorl_std.sandbox.commands import TIMEOUT_EXIT, closing, kill_group, tail, wait_exit
from legorl_std.sandbox.dockerfile import Image
from legorl_std.sandbox.limits import (
    MB,
    LimitLog,
    Limits,
    TrialCgroup,
    cgroup_name,
    cgroup_parents,
    cpu_mask,
    sweep_cgroups,
)
from legorl_std.sandbox.snapshot import (
    Change,
    CopySnapshot,
    ImageCache,
    Overlay,
    Sealed,
    Snapshot,
    unified_diff,
    unmount_stale,
)
from legorl_std.sandbox.users import UIDS_PER_BASE, NoFreeUid, claim_uid, identity_fds, pids_of_uid, write_identity
from legorl_std.sandbox.verify import apply, file_changes
from legorl_std.sandbox.view import (
    cover_args,
    expose_args,
    own_packages,
    parent_dirs,
    root_view_args,
)

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@functools.cache
def system_tool(name: str) -> str:
    """``name``'s absolute path in the system base (the host's, which the view shows read-only):
    what a command's wrapper runs, never looked up on the trial's PATH, where the agent may put
    a shim first (it would run before the wrapper drops to the trial user)."""
    return shutil.which(name, path=DEFAULT_PATH) or name
HOME = "/home/agent"
LOGS = "/logs"
LOG_DIRS = ("agent", "verifier", "artifacts")
TESTS = "/tests"
RESULTS_CAP = 8 << 20
"""Bytes of a result stream read back (a test report; more is cut)."""
_RESULTS = itertools.count()
BWRAP_MISSING = Problem(
    "the local sandbox needs bubblewrap (bwrap)", "install it: apt-get install bubblewrap"
)
_TRIAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
LIVE_LOCK = ".live"
"""A trial dir's file that its sandbox holds flock'ed: mounts of a trial without are stale."""
STORAGE_FULL = MB
"""A writable layer with less room left than this has been filled."""
CGROUP_JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; n=$((n-1)); shift; done; exec "$@"'
"""sh script: join the cgroups named by the first $1 args, then exec the rest."""


PROBE = (
    "--ro-bind", "/usr", "/usr", "--ro-bind-try", "/lib", "/lib", "--ro-bind-try", "/lib64", "/lib64",
    "--ro-bind-try", "/bin", "/bin", "--unshare-pid", "--unshare-net", "--die-with-parent", "true",
)  # fmt: skip
"""bubblewrap's arguments for the preflight's probe: the namespaces a sandbox needs, over the
system's programs only. Never the whole host (``--ro-bind / /``): its recursive bind races
every mount that comes and goes meanwhile (a container engine's overlays, another sandbox's
views) and fails the probe with EINVAL."""

class SandboxError(RuntimeError):
    """The sandbox could not be built or used (infrastructure, not the policy)."""


@dataclass(frozen=True)
class View:
    """What a trial shows of the host besides its own files (see :mod:`legorl_std.sandbox.view`)."""

    exposed: list[Path]
    """Host paths shown read-only at their own paths (``options.expose``)."""
    covered: list[Path]
    """Our own packages under those paths, shown as empty dirs."""


class LocalSandboxOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    root: str | None = Field(
        default=None,
        description="Directory of per-trial dirs (default: <run dir>/trials, or a temp dir).",
    )
    keep: bool = Field(default=True, description="Keep each trial dir (diff, logs) after stop, for audit.")
    bwrap: str = Field(default="bwrap", description="The bubblewrap executable.")
    snapshot: Literal["auto", "overlay", "copy"] = Field(
        default="auto",
        description="Trial files: overlayfs over a shared image (needs root), a full copy, or auto.",
    )
    storage_mb: int | None = Field(
        default=None,
        gt=0,
        description="Size of a trial's writable layer (default: the task's [environment] "
        "storage_mb, else 2048).",
    )
    uid_base: int | None = Field(
        default=61000,
        ge=1000,
        description="As root, trials run as their own uid above this one (group uid_base); "
        "null runs them as the caller.",
    )
    agent_network: bool = Field(
        default=False,
        description="Give the agent phase the host's network (default: loopback only, the proxy relayed).",
    )
    limits: Limits = Field(default_factory=Limits, description="Resource limits of every command.")
    expose: list[str] = Field(
        default_factory=list,
        description="More host paths shown read-only at their own paths (beside the system base "
        "and the harness's own files), e.g. an interpreter the tasks' tests run on.",
    )


class LocalSandboxBackend:
    """Starts trials in bubblewrap; construction touches nothing on disk."""

    def __init__(self, options: LocalSandboxOptions, ctx: BuildContext):
        self.options = options
        self._run_dir = ctx.run_dir.absolute() if ctx.run_dir else None
        self._root = ctx.path(options.root).absolute() if options.root else None
        if self._root is None and self._run_dir is not None:
            self._root = self._run_dir / "trials"
        self._lock = threading.Lock()
        self._images: ImageCache | None = None
        self._uids = itertools.count()
        self._slots = itertools.count()
        self._as_root = os.geteuid() == 0
        self._swept = False
        self._shown: View | None = None

    @property
    def root(self) -> Path:
        with self._lock:
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="legorl-trials-"))
            return self._root

    @property
    def images(self) -> ImageCache:
        root = self.root
        with self._lock:
            if self._images is None:
                self._images = ImageCache(root, self._group)
            return self._images

    @property
    def _group(self) -> int | None:
        return self.options.uid_base if self._as_root and self.options.uid_base else None

    def preflight(self) -> list[Problem]:
        path = shutil.which(self.options.bwrap)
        if path is None:
            return [BWRAP_MISSING]
        probe = subprocess.run([path, *PROBE], capture_output=True, text=True, timeout=30, check=False)
        if probe.returncode != 0:
            return [
                Problem(
                    f"bubblewrap ({path}) cannot create a sandbox here: {probe.stderr.strip()}",
                    "run as root, or allow unprivileged user namespaces "
                    "(sysctl kernel.unprivileged_userns_clone=1)",
                )
            ]
        problems = []
        if self._group is not None and not (shutil.which("setpriv") and shutil.which("prlimit")):
            problems.append(Problem("the local sandbox needs setpriv and prlimit", "apt-get install util-linux"))
        missing = {"memory", "cpu", "pids"} - set(cgroup_parents())
        if missing and self._as_root:
            problems.append(
                Problem(
                    f"no writable cgroup controller for {', '.join(sorted(missing))}: a task's "
                    "memory_mb is a per-process address-space limit, its cpus an affinity mask, "
                    "and hitting the memory or process limit is not reported as resource_limit",
                    "mount a writable cgroup v2 (or v1) hierarchy with those controllers",
                    fatal=False,
                )
            )
        if not self._as_root:
            problems.append(
                Problem(
                    "not root: trials are full copies (no overlayfs), run as the caller (no "
                    "per-trial user, so the process limit is shared)",
                    "run as root for copy-on-write snapshots and per-trial users",
                    fatal=False,
                )
            )
        return problems

    def start(self, task: Task, trial_id: str) -> LocalSandbox:
        if not _TRIAL_ID.match(trial_id):
            raise SandboxError(f"trial id {trial_id!r} must be a plain file name ([A-Za-z0-9._-])")
        dockerfile = task.path / "environment" / "Dockerfile"
        environment = task.config.get("environment", {})
        if not dockerfile.is_file():
            image = environment.get("docker_image") if isinstance(environment, dict) else None
            need = f"the prebuilt image {image!r}" if image else f"{dockerfile}, which is missing"
            raise SandboxError(
                f"task {task.name} needs {need}; the local sandbox only materialises a "
                "Dockerfile's files (run it with the `harbor` sandbox for container images)"
            )
        bwrap = shutil.which(self.options.bwrap)
        if bwrap is None:
            raise SandboxError(str(BWRAP_MISSING))
        resources = _declared_resources(task)
        self._sweep()
        image, lower = self.images.get(dockerfile, {"PATH": DEFAULT_PATH})
        trial_dir = self.root / trial_id
        try:
            trial_dir.mkdir(parents=True)
        except FileExistsError:
            raise SandboxError(f"trial dir {trial_dir} exists already; trial ids must be unique") from None
        live = os.open(trial_dir / LIVE_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(live, fcntl.LOCK_EX)
        held = self._next_user()
        user = held[:2] if held else None
        fds = [live, *([held[2]] if held else [])]
        snapshot = self._snapshot(lower, trial_dir, user, task)

        def fresh(prefix: str, base: Sealed | None) -> Snapshot:
            return self._snapshot(lower, trial_dir, user, task, prefix, base)

        cgroup: TrialCgroup | None = None
        try:
            if self._as_root:
                cgroup = TrialCgroup.create(
                    cgroup_name(trial_id), memory_mb=resources.get("memory_mb"),
                    cpus=resources.get("cpus"), nproc=self.options.limits.nproc,
                )  # fmt: skip
            snapshot.mount()
            sandbox = LocalSandbox(
                bwrap, trial_dir, image, snapshot, lower, self._view(), task,
                options=self.options, user=user, fds=fds, cgroup=cgroup,
                resources=resources, slot=next(self._slots), fresh=fresh,
            )  # fmt: skip
        except BaseException:
            for fd in fds:
                os.close(fd)
            with contextlib.suppress(OSError):
                snapshot.unmount()
            if cgroup is not None:
                with contextlib.suppress(OSError):
                    cgroup.remove()
            shutil.rmtree(trial_dir, ignore_errors=True)
            raise
        (trial_dir / "sandbox.json").write_text(json.dumps(sandbox.describe(task), indent=2) + "\n")
        return sandbox

    def _sweep(self) -> None:
        """Once per backend: unmount what trials of a killed process left under the root
        (their dirs' live lock is free), and remove such a process's cgroups."""
        with self._lock:
            if self._swept:
                return
            self._swept = True
        if self._as_root:
            unmount_stale(self.root, lambda name: _trial_live(self.root / name))
            sweep_cgroups()

    def _next_user(self) -> tuple[int, int, int] | None:
        """(uid, gid, lock fd): a uid no other trial on this machine holds, with no process."""
        group = self._group
        if group is None:
            return None
        try:
            return claim_uid(group, (os.getpid() * 7919 + next(self._uids)) % UIDS_PER_BASE)
        except NoFreeUid as exc:
            raise SandboxError(str(exc)) from None

    def _view(self) -> View:
        """What every trial shows besides its own files (computed once)."""
        with self._lock:
            if self._shown is None:
                exposed = [Path(os.path.abspath(p)) for p in self.options.expose]
                self._shown = View(exposed, own_packages([*exposed, Path("/usr")]))
            return self._shown

    def _snapshot(
        self,
        lower: Path,
        trial_dir: Path,
        user: tuple[int, int] | None,
        task: Task,
        prefix: str = "",
        base: Sealed | None = None,
    ) -> Snapshot:
        mode = self.options.snapshot
        if mode == "auto":
            mode = "overlay" if self._as_root else "copy"
        if mode == "copy":
            return CopySnapshot(lower, trial_dir, user, prefix, base)
        if not self._as_root:
            raise SandboxError("sandbox.options.snapshot=overlay needs root (mounts); use auto or copy")
        environment = task.config.get("environment", {})
        storage = self.options.storage_mb or (
            environment.get("storage_mb") if isinstance(environment, dict) else None
        )
        return Overlay(lower, trial_dir, int(storage or 2048), user, prefix, base)


class LocalSandbox:
    """One started trial. Paths inside that persist between execs live under ``fs``."""

    def __init__(
        self,
        bwrap: str,
        trial_dir: Path,
        image: Image,
        snapshot: Snapshot,
        lower: Path,
        view: View,
        task: Task,
        *,
        options: LocalSandboxOptions,
        user: tuple[int, int] | None,
        fds: list[int] | None = None,
        cgroup: TrialCgroup | None = None,
        resources: dict[str, float] | None = None,
        slot: int = 0,
        fresh: Callable[[str, Sealed | None], Snapshot] | None = None,
    ):
        self.workdir = image.workdir
        self.trial_dir = trial_dir
        self.fs = snapshot.merged
        self.image = image
        self.user = user
        self.phase: Literal["agent", "verify"] = "agent"
        self._snapshot = snapshot
        self._bwrap = bwrap
        self._options = options
        self._view = view
        self._provided: list[Path] = []
        self._provided_covered: list[Path] = []
        self._fresh = fresh or (lambda prefix, base: CopySnapshot(lower, trial_dir, user, prefix, base))
        self._snapshots = [snapshot]
        self._start: Sealed | None = None
        self._env = {"PATH": DEFAULT_PATH, "HOME": HOME, "LANG": "C.UTF-8", **image.env}
        if user:
            self._env |= {"USER": "agent", "LOGNAME": "agent"}
        self._verify_network = _declared_network(task) == "public"
        self._mounts: list[str] = []
        self._live: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self._relay: netforward.NetnsRelay | None = None
        self._relay_port = 0
        self._agent_host_network = False
        self._stopped = False
        self._cgroup = cgroup
        self._resources = resources or {}
        self._slot = slot
        self._limits_hit = LimitLog()
        self._prepare_tree()
        if user:
            write_identity(trial_dir, user, HOME)
        # A sandbox dropped without stop() must not leave mounts behind on the host.
        self._finalizer = weakref.finalize(self, _release, self._snapshots, cgroup, fds or [])

    def _prepare_tree(self) -> None:
        """Mount points of the image, a fresh ``/logs`` and ``$HOME``; the image's own dirs
        (and a repo's .git) belong to the trial user, so git trusts them."""
        with self._lock:
            self._mounts = []
        for point in [*self.image.mount_points, LOGS, HOME]:
            self._add_mount(point)
        for path in [*(f"{LOGS}/{n}" for n in LOG_DIRS), HOME]:
            self._fresh_dir(path)
        if self.user:
            for point in self.image.mount_points:
                for host in (self.host_path(point), self.host_path(point) / ".git"):
                    if host.is_dir() and not host.is_symlink():
                        os.chown(host, *self.user)

    # ------------------------------------------------------------------ Sandbox protocol

    def exec(
        self,
        command: str,
        *,
        timeout: float,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        fds: tuple[int, ...] = (),
    ) -> ExecResult:
        """Run ``command`` in a fresh bwrap of the trial; ``fds`` are host descriptors the
        command inherits under their own numbers."""
        if self._stopped:
            raise SandboxError(f"trial {self.trial_dir.name} was stopped; no more commands")
        inside_cwd = self._inside(cwd or self.workdir)
        relay = self._relay if self.phase == "agent" and not self._network() else None
        identity = self._identity_fds()
        fds = (*fds, *(fd for fd, _ in identity))
        argv = [self._bwrap, *self._bwrap_argv(inside_cwd, relay is not None, identity)]
        argv += ["--", system_tool("bash"), "-c", self._launcher(), "legorl", command]
        if relay is not None:  # join the trial's namespace, where the proxy is relayed
            argv = [system_tool("nsenter"), f"--net=/proc/self/fd/{relay.ns_fd}", *argv]
        if self._cgroup is not None and self._cgroup.dirs:
            procs = self._cgroup.procs_files()
            argv = [system_tool("sh"), "-c", CGROUP_JOIN, "legorl-cgroup", str(len(procs)), *procs, *argv]
        clean_env = {**self._env, **(env or {})}  # via the process env, so values never show in ps
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, closing(identity):
            start = time.monotonic()
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=clean_env,
                start_new_session=True,
                pass_fds=(*fds, *((relay.ns_fd,) if relay is not None else ())),
            )
            with self._lock:
                self._live.add(proc)
            try:
                exited = wait_exit(proc, timeout)
            finally:
                kill_group(proc)
                with self._lock:
                    self._live.discard(proc)
            seconds = time.monotonic() - start
            stdout, stderr = tail(out), tail(err)
        timed_out = exited is None
        code = TIMEOUT_EXIT if exited is None else exited
        if code < 0:
            code = 128 - code
        if code == 1 and stderr.startswith("bwrap: "):
            raise SandboxError(f"bubblewrap could not set up trial {self.trial_dir.name}: {stderr.strip()}")
        if code == 125 and stderr.startswith("legorl-cgroup: "):
            raise SandboxError(f"trial {self.trial_dir.name} could not join its cgroup: {stderr.strip()}")
        self._check_resources(None if timed_out else code)
        return ExecResult(code, stdout, stderr, timed_out, seconds)

    def upload(self, src: Path, dst: str) -> None:
        """Copy a host file/dir so it appears at ``dst`` inside (from the next exec on).

        Agent-phase uploads belong to the trial user; verify-phase ones (the tests) to root,
        so code under test cannot change them."""
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
        elif target.is_dir():
            raise IsADirectoryError(f"upload of file {src} to {inside}: a directory exists there")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
        if self.user and self.phase == "agent":  # the agent's own; verify-phase files stay root's
            for path in [target, *(target.rglob("*") if target.is_dir() else [])]:
                os.lchown(path, *self.user)

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
        """``host_url`` as the agent phase reaches it: 127.0.0.1 on the same port of the
        trial's network namespace, relayed to the host server (only that one)."""
        if os.geteuid() != 0:  # no namespaces of our own: the agent keeps the host network
            self._agent_host_network = True
        if self._options.agent_network or self._agent_host_network:
            return host_url
        url = urllib.parse.urlsplit(host_url)
        if url.scheme != "http" or url.hostname is None or url.port is None:
            raise SandboxError(f"the local sandbox relays http://HOST:PORT/... URLs only, got {host_url!r}")
        with self._lock:
            if self._relay is None:
                self._relay = netforward.NetnsRelay(url.port, url.hostname, url.port)
                self._relay_port = url.port
            elif self._relay_port != url.port:
                raise SandboxError(f"trial {self.trial_dir.name} already relays port {self._relay_port}")
        return urllib.parse.urlunsplit(url._replace(netloc=f"127.0.0.1:{url.port}"))

    def stop(self) -> None:
        """Kill whatever still runs, unmount; drop the trial dir unless ``keep`` (the default),
        which keeps ``sandbox.json``, ``agent.diff`` and a copy of ``/logs``."""
        if self._stopped:
            return
        self._stopped = True
        self.kill_all()
        if self._relay is not None:
            self._relay.close()
        try:
            if self._options.keep and self.fs.is_dir():
                with contextlib.suppress(OSError, shutil.Error):
                    shutil.copytree(self.fs / LOGS.lstrip("/"), self.trial_dir / "logs", symlinks=True, dirs_exist_ok=True)
        finally:
            self._finalizer()  # unmount, free the uid
            if not self._options.keep:
                shutil.rmtree(self.trial_dir, ignore_errors=True)

    # ------------------------------------------------------------------ phases and audit

    def kill_all(self) -> int:
        """Kill every command still running (and all it started); how many there were."""
        with self._lock:
            live = list(self._live)
        for proc in live:
            kill_group(proc)
        return len(live)

    def writable_roots(self) -> list[str]:
        """The in-sandbox paths that persist and that the agent can write."""
        return list(self._mounts)

    def processes(self, settle: float = 2.0) -> list[int]:
        """Host pids of processes still running as this trial's user once those of ended
        commands had ``settle`` seconds to go (a PID namespace dies asynchronously)."""
        if not self.user:
            return []
        deadline = time.monotonic() + settle
        while (pids := pids_of_uid(self.user[0])) and time.monotonic() < deadline:
            time.sleep(0.02)
        return pids

    def changes(self) -> list[Change]:
        """What the trial changed relative to its image (from the overlay's upper layer)."""
        return self._snapshot.changes()

    def diff(self, changes: list[Change] | None = None) -> str:
        """Unified diff of the changes to the image's own files (the workdir and COPY targets)."""
        found = self.changes() if changes is None else changes
        return unified_diff(self._snapshot, self._snapshot.view, found, self.image.mount_points)

    def begin_agent(self) -> None:
        """Seal the task's starting state as it is now (after the before-agent checks, e.g.
        git-history's rewrite): the agent's changes are counted from it and verification
        starts from it, so nothing those checks removed comes back for the tested code."""
        if self._start is not None or self.phase != "agent":
            return
        self.kill_all()
        self._start = self._snapshot.seal()
        agent = self._fresh("agent-", self._start)
        agent.mount()
        self._snapshots.append(agent)
        self._snapshot, self.fs = agent, agent.merged

    def begin_verify(self, task: Task) -> dict[str, Any]:
        """End the agent phase (see the module doc); returns what the verifier should record.
        Raises :class:`~lego_rl.crossing.CrossingLimit` when the agent changed too much."""
        killed = self.kill_all()
        changes = self.changes()
        self._check_file_sizes(changes)
        self._check_resources(None)  # a layer the agent filled: recorded for the agent phase
        (self.trial_dir / "agent.diff").write_text(self.diff(changes))
        policy = CrossingPolicy.for_task(task, self.image.mount_points)
        self._keep_logs()
        fresh = self._fresh("verify-", self._start)
        fresh.mount()
        self._snapshots.append(fresh)
        start = fresh.merged  # the task's starting state: which directories are packages there
        crossing = policy.decide(file_changes(changes, self.fs), lambda d: (start / d.lstrip("/") / "__init__.py").is_file())
        try:
            apply(crossing, self.fs, fresh.merged, self.user)
        except OSError as exc:  # the agent's files (their names, sizes): the copy cannot hold them
            raise CrossingLimit(f"the agent's change cannot be applied to the verification copy: {exc}") from exc
        old, self._snapshot, self.fs = self._snapshot, fresh, fresh.merged
        self._snapshots.remove(old)
        old.unmount()
        self.phase = "verify"
        self._provided, self._provided_covered = [], []
        self._prepare_tree()
        own = [c for c in changes if any(_under(c.path, m) for m in self.image.mount_points)]
        return {
            "agent_diff": str(self.trial_dir / "agent.diff"),
            "agent_changes": [f"{c.kind[0].upper()} {c.path}" for c in own[:200]],
            "agent_commands_killed": killed,
            "pristine": True,
            "crossing": crossing.summary(),
        }

    def provide(self, paths: Sequence[Path]) -> None:
        """Show host ``paths`` read-only at their own paths in the agent phase (a harness's
        own files), from the next command on."""
        with self._lock:
            self._provided += [Path(os.path.abspath(p)) for p in paths]
            self._provided_covered = own_packages(self._provided)  # lego-rl's own, if a harness lives beside it

    def exec_reporting(
        self, command: str, *, timeout: float, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> tuple[ExecResult, str]:
        """``exec`` with a result stream: a host file, open for appending as the descriptor
        named by ``$LEGORL_RESULTS_FD``, that nothing inside can open by path (it lies outside
        the view, owned by root). The execution, then what was written to it."""
        results = self.trial_dir / f"results-{next(_RESULTS)}.jsonl"
        fd = os.open(results, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            execution = self.exec(command, timeout=timeout, env={**(env or {}), RESULTS_FD_ENV: str(fd)}, cwd=cwd, fds=(fd,))
        finally:
            os.close(fd)
        with open(results, "rb") as stream:
            return execution, stream.read(RESULTS_CAP).decode("utf-8", errors="replace")

    def _identity_fds(self) -> list[tuple[int, str]]:
        """Fresh memory files holding the trial's passwd and group (one pair per command)."""
        return identity_fds(self.trial_dir) if self.user else []

    def _keep_logs(self) -> None:
        """Copy the agent phase's ``/logs`` to the trial dir (the verify copy starts fresh)."""
        if self._options.keep:
            with contextlib.suppress(OSError, shutil.Error):
                shutil.copytree(self.fs / LOGS.lstrip("/"), self.trial_dir / "logs", symlinks=True, dirs_exist_ok=True)

    def resources_exhausted(self) -> list[dict[str, str]]:
        """The resource limits the trial's commands ran into: ``phase`` (agent or verify),
        ``limit`` (its name and value, e.g. ``memory_mb=64``) and ``detail``."""
        return self._limits_hit.events()

    def _check_resources(self, exit_code: int | None) -> None:
        """Record the limits the last command (or one running beside it) ran into."""
        found = LimitLog.signalled(self._options.limits, exit_code)
        left = self._snapshot.space_left()
        if left is not None and left < STORAGE_FULL:
            found.append((f"storage_mb={self._snapshot_mb()}", f"the writable layer is full ({left} bytes left)"))
        if self._cgroup is not None:
            values = self._cgroup.values
            found += self._limits_hit.counted(
                self._cgroup.exhausted(), {"memory_mb": values.get("memory"), "nproc": values.get("pids")}
            )
        self._limits_hit.record(self.phase, found)

    def _check_file_sizes(self, changes: list[Change]) -> None:
        """Files of exactly the file-size limit were cut by it (their writer got SIGXFSZ)."""
        cap = self._options.limits.file_size_mb
        if not cap:
            return
        cut = [c.path for c in changes if c.kind != "deleted" and _size(self.fs / c.path.lstrip("/")) == cap * MB]
        if cut:
            self._limits_hit.record(self.phase, [(f"file_size_mb={cap}", f"{', '.join(cut[:5])} stopped at the limit")])

    def _snapshot_mb(self) -> int | None:
        return getattr(self._snapshot, "size_mb", None)

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
            "snapshot": type(self._snapshot).__name__,
            "user": list(self.user) if self.user else None,
            "exposed": [str(p) for p in self._view.exposed],
            "covered": [str(p) for p in self._view.covered],
            "limits": self._options.limits.model_dump(),
            "resources": self._resources,
            "cgroup": {k: str(v[0]) for k, v in self._cgroup.dirs.items()} if self._cgroup else None,
            "verify_network": self._verify_network,
        }

    def _inside(self, path: str) -> str:
        joined = posixpath.normpath(posixpath.join(self.workdir, path))
        return "/" + joined.lstrip("/")

    def _covered(self, inside: str) -> bool:
        return any(_under(inside, m) for m in self._mounts)

    def _add_mount(self, inside: str) -> None:
        with self._lock:
            if not self._covered(inside):
                self._mounts.append(inside)

    def _fresh_dir(self, inside: str) -> None:
        """Replace ``inside`` by an empty dir owned by the trial's user."""
        path = self.host_path(inside)
        if os.path.lexists(path):
            _remove(path)
        path.mkdir(parents=True)
        if self.user:
            os.chown(path, *self.user)

    def _network(self) -> bool:
        if self.phase == "verify":
            return self._verify_network
        return self._options.agent_network or self._agent_host_network

    def _launcher(self) -> str:
        """The bash script bwrap runs: drop to the trial user, apply the limits, run ``$1``."""
        wrapper: list[str] = []
        if self.user:
            uid, gid = self.user
            wrapper += [
                system_tool("setpriv"), f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs",
            ]  # fmt: skip
        controlled = self._cgroup.values if self._cgroup else {}
        memory = self._resources.get("memory_mb") if "memory" not in controlled else None
        limits = self._options.limits.prlimit_args(int(memory) if memory else None)
        if limits:
            wrapper += [system_tool("prlimit"), *limits, "--"]
        cpus = self._resources.get("cpus")
        if cpus and "cpu" not in controlled:  # no cgroup: pin to that many CPUs instead
            wrapper += [system_tool("taskset"), "-c", ",".join(map(str, cpu_mask(cpus, self._slot)))]
        return f'exec {shlex.join([*wrapper, system_tool("bash"), "-c"])} "$1"'

    def _bwrap_argv(self, cwd: str, relayed: bool, identity: Sequence[tuple[int, str]] = ()) -> list[str]:
        """The view of one command; ``identity``: (descriptor, name) of the /etc files that
        name the trial user, read by bwrap (so no host path of them shows inside)."""
        argv = [*root_view_args(self._mounts), "--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp"]
        made: set[str] = set()
        argv += expose_args([*self._view.exposed, *self._provided], made)
        argv += cover_args([*self._view.covered, *self._provided_covered])
        for point in sorted(self._mounts, key=lambda m: m.count("/")):
            argv += parent_dirs(point, made)
            argv += ["--bind", str(self.fs / point.lstrip("/")), point]
        for fd, name in identity:
            argv += ["--perms", "0644", "--ro-bind-data", str(fd), f"/etc/{name}"]
        if not self._network() and not relayed:
            argv.append("--unshare-net")
        return [
            *argv,
            "--remount-ro", "/",
            "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--die-with-parent", "--new-session",
            "--chdir", cwd,
        ]  # fmt: skip


def _release(snapshots: list[Snapshot], cgroup: TrialCgroup | None, fds: list[int]) -> None:
    try:
        while snapshots:
            snapshots.pop().unmount()
    finally:
        try:
            if cgroup is not None:
                cgroup.remove()  # kills any process left
        finally:
            for fd in fds:
                os.close(fd)  # the uid is free again, the trial's mounts no longer live
            fds.clear()


def _trial_live(trial_dir: Path) -> bool:
    """Whether a sandbox (of any process) holds ``trial_dir``'s live lock."""
    try:
        fd = os.open(trial_dir / LIVE_LOCK, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _declared_resources(task: Task) -> dict[str, float]:
    """The task's ``[environment] memory_mb`` and ``cpus`` (positive numbers only)."""
    environment = task.config.get("environment", {})
    found: dict[str, float] = {}
    for key in ("memory_mb", "cpus"):
        value = environment.get(key) if isinstance(environment, dict) else None
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise SandboxError(f"task {task.name}: [environment] {key} must be a positive number, got {value!r}")
        found[key] = value
    return found


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return -1


def _declared_network(task: Task) -> str:
    environment = task.config.get("environment", {})
    mode = environment.get("network_mode") if isinstance(environment, dict) else None
    return str(mode or "no-network")


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def build(options: LocalSandboxOptions, ctx: BuildContext) -> LocalSandboxBackend:
    """Bubblewrap sandbox on this machine: a built view (system base, interpreter, harness files), overlay snapshots, pristine verification."""
    return LocalSandboxBackend(options, ctx)


@hookimpl
def legorl_register_sandbox(register: Any) -> None:
    register("local", build, options=LocalSandboxOptions)
