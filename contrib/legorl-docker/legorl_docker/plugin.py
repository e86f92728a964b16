"""Sandbox ``docker``: one container per trial phase, on a Docker daemon, with no network.

The plain ``docker`` CLI drives the daemon (no Harbor, no SDK): the task's
``environment/Dockerfile`` is built offline (:mod:`legorl_docker.images`), the trial runs in
containers created from it (:mod:`legorl_docker.sandbox`), every command through ``docker
exec`` with its process tree tracked and killed from the host (:mod:`legorl_docker.container`).
Containers get ``--network none``; the agent reaches the proxy through a per-trial unix socket
and a relay on the container's own loopback. Limits: task.toml ``[environment] memory_mb`` and
``cpus`` (the container's cgroup), ``storage_mb`` (``--storage-opt size`` where the storage
driver supports it: btrfs, which lego-rl's own daemon uses), a process count, and per-command
rlimits.

Capabilities: ``PristineVerify``, ``ResultStream``, ``ProvidesFiles``, ``KillsCommands``,
``ListsProcesses``, ``ReportsLimits`` (OOM kills and refused forks, from the cgroups).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from lego_rl import hookimpl
from lego_rl.kinds import Problem, Task
from lego_rl.registry import BuildContext
from legorl_docker import daemon, procs
from legorl_docker.cli import Docker, DockerError
from legorl_docker.container import SandboxError, Settings
from legorl_docker.images import HOME, TaskImages
from legorl_docker.options import HOST_ENV, DockerOptions
from legorl_docker.sandbox import DockerSandbox

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEFAULT_STORAGE_MB = 2048
STORAGE_SLACK = 32 << 20
"""Bytes over storage_mb (and the image, where counted) of a btrfs container's quota (its metadata)."""
OWNER_LABEL = "legorl.docker.owner"
STATE_PREFIX = "legorl-dk-"
OWN_DAEMON = "unix:///run/legorl-docker/docker.sock"
_TRIAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_RLIMITS = {"cpu_seconds": "RLIMIT_CPU", "address_space_mb": "RLIMIT_AS", "file_size_mb": "RLIMIT_FSIZE", "open_files": "RLIMIT_NOFILE"}


class DockerBackend:
    """Starts trials on one Docker daemon; construction touches nothing."""

    def __init__(self, options: DockerOptions, ctx: BuildContext):
        self.options = options
        self.docker = Docker(options.daemon(), options.docker)
        self._root = ctx.path(options.root).absolute() if options.root else None
        if self._root is None and ctx.run_dir is not None:
            self._root = ctx.run_dir.absolute() / "trials"
        self.images = TaskImages(
            self.docker, (options.uid, options.gid), base_images=options.base_images,
            fallback_base=options.fallback_base, log_dir=Path(tempfile.gettempdir()) / "legorl-docker-images",
            timeout=options.build_timeout,
        )  # fmt: skip
        self._lock = threading.Lock()
        self._swept = False
        self._driver: str | None = None
        self.owner = f"{os.getpid()}.{procs.start_time(os.getpid())}"

    @property
    def root(self) -> Path:
        """Where trial records go (the red team's ``trials`` placeholder)."""
        with self._lock:
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="legorl-docker-trials-"))
            return self._root

    def preflight(self) -> list[Problem]:
        if self.docker.path() is None:
            return [Problem(f"the docker sandbox needs the docker CLI ({self.options.docker})", "apt-get install docker.io (scripts/setup.sh, as root)")]
        try:
            info = json.loads(self.docker.text("info", "--format", "{{json .}}", timeout=30))
        except (DockerError, ValueError) as exc:
            reason = exc.stderr if isinstance(exc, DockerError) else str(exc)
            return [
                Problem(
                    f"the docker sandbox cannot reach a Docker daemon at {self.docker.address}: {reason.strip()[-300:]}",
                    "start lego-rl's own (no bridge, no NAT): sudo scripts/dockerd.sh start, then point the "
                    f"sandbox at it (options.host or ${HOST_ENV}={OWN_DAEMON}); or start your own dockerd",
                )
            ]
        if not isinstance(info, dict) or not info.get("ServerVersion"):
            return [Problem(f"the Docker daemon at {self.docker.address} did not answer `docker info`", "check its log")]
        problems = []
        base = self.options.fallback_base
        if base and not self.docker.image_exists(base):
            problems.append(
                Problem(
                    f"the docker sandbox's base image {base} is not in the daemon at {self.docker.address} "
                    "(no registry is reachable, so task images are built on it)",
                    f"build it offline: python -m legorl_docker.base --host {self.docker.address}",
                )
            )
        self._driver = str(info.get("Driver", ""))
        if self._driver != "btrfs":
            problems.append(
                Problem(
                    f"the daemon's storage driver is {self._driver!r}: a task's storage_mb is not enforced",
                    "use lego-rl's daemon (scripts/dockerd.sh: btrfs) or overlay2 on XFS with pquota",
                    fatal=False,
                )
            )
        if os.geteuid() != 0:
            problems.append(
                Problem(
                    "not root: a command's leftover processes are killed through `docker exec` (slower)",
                    "run as root",
                    fatal=False,
                )
            )
        return problems

    def start(self, task: Task, trial_id: str) -> DockerSandbox:
        if not _TRIAL_ID.match(trial_id):
            raise SandboxError(f"trial id {trial_id!r} must be a plain file name ([A-Za-z0-9._-])")
        self._sweep()
        try:
            image = self.images.get(task)
        except DockerError as exc:
            raise SandboxError(f"the Docker daemon failed while preparing task {task.name}'s image: {exc}") from exc
        environment = task.config.get("environment", {})
        environment = environment if isinstance(environment, dict) else {}
        resources = {k: environment.get(k) for k in ("memory_mb", "cpus")}
        for key, value in resources.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
                raise SandboxError(f"task {task.name}: [environment] {key} must be a positive number, got {value!r}")
        storage = self.options.storage_mb or environment.get("storage_mb") or DEFAULT_STORAGE_MB
        record = None
        if self.options.keep:
            record = self.root / trial_id
            try:
                record.mkdir(parents=True)
            except FileExistsError:
                raise SandboxError(f"trial dir {record} exists already; trial ids must be unique") from None
        state = Path(tempfile.mkdtemp(prefix=STATE_PREFIX))  # short: unix socket paths are
        (state / "owner").write_text(self.owner)
        labels = {OWNER_LABEL: self.owner, "legorl.trial": trial_id}
        limits = self.options.limits
        rlimits = {}
        for field, name in _RLIMITS.items():
            value = getattr(limits, field)
            if value:
                scale = (1 << 20) if field.endswith("_mb") else 1
                soft = value * scale
                hard = soft + 5 if field == "cpu_seconds" else soft
                rlimits[name] = (soft, hard)
        env = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8", **image.env, "HOME": HOME, "USER": "agent", "LOGNAME": "agent"}
        settings = Settings(
            user=(self.options.uid, self.options.gid),
            memory_mb=resources["memory_mb"],
            cpus=resources["cpus"],
            pids=limits.nproc,
            storage_bytes=self._storage_bytes(image.size, int(storage)),
            storage_mb=int(storage) if self._caps_storage() else None,
            rlimits=rlimits,
            labels=labels,
            env=env,
        )
        sandbox = DockerSandbox(
            self.docker, task, trial_id, image, settings=settings, state=state, record=record,
            labels=labels, relay_port=self.options.relay_port, limits=limits,
        )  # fmt: skip
        if record is not None:
            (record / "sandbox.json").write_text(json.dumps(sandbox.describe(task), indent=2) + "\n")
        return sandbox

    def _storage_bytes(self, image_size: int, storage_mb: int) -> int | None:
        """A container's quota for ``storage_mb`` of its own writes (None: not enforced here)."""
        if not self._caps_storage():
            return None
        return (image_size if self._quota_counts_image() else 0) + storage_mb * (1 << 20) + STORAGE_SLACK

    def _quota_counts_image(self) -> bool:
        """Whether the daemon's btrfs quota counts the image layers a container shares: full
        qgroups limit the bytes a subvolume references, simple quotas only what it wrote. Known
        for lego-rl's own daemon (its data root's mode); taken as full qgroups elsewhere."""
        if self.docker.address != OWN_DAEMON:
            return True
        return daemon.quota_mode(daemon.STATE / "data") != "squota"

    def _caps_storage(self) -> bool:
        if self._driver is None:
            with contextlib.suppress(DockerError):
                self._driver = self.docker.text("info", "--format", "{{.Driver}}", timeout=30)
        return self._driver == "btrfs"

    def _sweep(self) -> None:
        """Once per backend: remove what trials of processes that died left (containers,
        committed images, state dirs)."""
        with self._lock:
            if self._swept:
                return
            self._swept = True
        for kind in ("ps", "images"):
            args = ["ps", "-a"] if kind == "ps" else ["images"]
            with contextlib.suppress(DockerError):
                listing = self.docker.text(*args, "--filter", f"label={OWNER_LABEL}", "--format", "{{.ID}} {{.Labels}}", timeout=60)
                for line in listing.splitlines():
                    ident, _, labels = line.partition(" ")
                    owner = dict(p.split("=", 1) for p in labels.split(",") if "=" in p).get(OWNER_LABEL, "")
                    if owner and not _alive(owner):
                        self.docker.run("rm" if kind == "ps" else "rmi", "--force", ident, check=False, timeout=120)
        for state in Path(tempfile.gettempdir()).glob(f"{STATE_PREFIX}*"):
            with contextlib.suppress(OSError):
                if not _alive((state / "owner").read_text().strip()):
                    shutil.rmtree(state, ignore_errors=True)


def _alive(owner: str) -> bool:
    pid, _, started = owner.partition(".")
    return pid.isdigit() and procs.start_time(int(pid)) == int(started or -2)


def build(options: DockerOptions, ctx: BuildContext) -> DockerBackend:
    """One Docker container per trial phase: offline image builds, no network, the proxy through a unix socket."""
    return DockerBackend(options, ctx)


@hookimpl
def legorl_register_sandbox(register: Any) -> None:
    register("docker", build, options=DockerOptions)


@hookimpl
def legorl_register_benchmarks(register: Any) -> None:
    from legorl_docker import bench

    register("docker", bench.main)  # legorl bench docker
