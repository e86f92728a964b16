"""One trial in Docker: a container per phase, created lazily, never with a network.

- **Agent phase.** The first command (or upload, or download) creates the container from the
  task's image, so the harness's files that :meth:`DockerSandbox.provide` names (given right
  after start, as the trial runner does) are read-only binds at their own paths: binds are
  fixed at creation, and a bind costs nothing where a copy of a runtime or a venv would cost
  seconds and gigabytes. Paths provided once a container exists make it be re-created from a
  commit of itself (its changes kept). :meth:`begin_agent` seals the starting state: the
  container, if the before-agent checks used it, is committed (only when ``docker diff`` shows a
  change), and the agent's container is created from that image, so its ``docker diff`` is
  exactly the agent's change.
- **Proxy.** :meth:`endpoint_url` maps the host's proxy URL to ``http://127.0.0.1:RELAY/...``
  inside: the container's init listens there and relays to a unix socket of this trial, bound
  from the host, whose host end (:class:`legorl_std.sandbox.netforward.SocketRelay`) relays to the proxy.
- **Verify phase.** :meth:`begin_verify` kills what runs, reads the agent's change (``docker
  diff``, the files' types and bytes through the daemon), lets the task's crossing policy
  decide, and creates a fresh container from the sealed state with only the crossed change
  (:mod:`legorl_docker.verify`); no proxy, no harness files, and still no network (a task's
  ``network_mode = "public"`` is not honoured here). :meth:`exec_reporting` gives a command a
  result stream: a root-only host file in the container's ``/run/legorl``, opened by the
  command's root wrapper before it drops to the trial user.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import posixpath
import re
import secrets
import shutil
import tarfile
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from legorl_std.sandbox.limits import DISK_FULL, LimitLog, Limits
from legorl_std.sandbox.mounts import traverse_above
from legorl_std.sandbox.netforward import SocketRelay

from lego_rl.crossing import ChangeKind, CrossingPolicy
from lego_rl.data import ResourceExhausted
from lego_rl.kinds import ExecResult, Task
from legorl_docker import verify
from legorl_docker.cli import Docker, DockerError
from legorl_docker.container import RESULTS_CAP, Container, SandboxError, Settings
from legorl_docker.images import HOME, TaskImage

LOGS = "/logs"
SCRATCH = ("/tmp", "/var/tmp")
"""Dirs every image lets the trial user write (besides the task's files, /logs and $HOME)."""
_NAME = re.compile(r"[^a-zA-Z0-9_.-]")
_RESULTS = itertools.count()
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class Change:
    """One path changed since the starting state: ``kind`` added | modified | deleted."""

    path: str
    kind: str


class DockerSandbox:
    """One started trial (see the module doc)."""

    def __init__(
        self,
        docker: Docker,
        task: Task,
        trial_id: str,
        image: TaskImage,
        *,
        settings: Settings,
        state: Path,
        record: Path | None,
        labels: dict[str, str],
        relay_port: int,
        limits: Limits,
    ):
        self.workdir = image.workdir
        self.trial_id = trial_id
        self.image = image
        self.phase: Literal["agent", "verify"] = "agent"
        self._docker = docker
        self._settings = settings
        self._state = state
        self._record = record
        self._labels = labels
        self._relay_port = relay_port
        self._limits = limits
        self._lock = threading.RLock()
        self._base = image.tag
        """The image the agent phase's next container is created from."""
        self._start = image.tag
        """The starting state: the task's image, or the sealed one; verification starts from it."""
        self._images: list[str] = []
        """Images this trial committed (removed at stop)."""
        self._container: Container | None = None
        self._relays: dict[str, SocketRelay] = {}
        self._upstream: tuple[str, int] | None = None
        self._provided: list[Path] = []
        self._earlier: list[tuple[ChangeKind, str]] = []
        """docker diff of containers this phase replaced before sealing (re-created for binds)."""
        self._sealed = False
        self._stopped = False
        self._limits_hit = LimitLog()
        self._names = itertools.count()
        self.bound: list[Path] = []
        """Host paths shown read-only (bound) in an agent-phase container so far."""
        self._spare: Future[Container] | None = None
        self._background: list[threading.Thread] = []
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------ Sandbox protocol

    def exec(
        self, command: str, *, timeout: float, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> ExecResult:
        container = self._current()
        result = container.exec(command, timeout=timeout, env=env, cwd=self._inside(cwd or self.workdir))
        self._check_resources(container, None if result.timed_out else result.exit_code, result.stderr)
        return result

    def exec_reporting(
        self, command: str, *, timeout: float, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> tuple[ExecResult, str]:
        """``exec`` with a result stream: a root-only host file opened as ``$LEGORL_RESULTS_FD``
        by the command's wrapper before it drops to the trial user (nothing inside can open it
        by path); the execution, then what was written to it."""
        container = self._current()
        results = container.run_dir / "results" / f"{next(_RESULTS)}.jsonl"
        os.close(os.open(results, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        try:
            result = container.exec(command, timeout=timeout, env=env, cwd=self._inside(cwd or self.workdir), results=results)
            self._check_resources(container, None if result.timed_out else result.exit_code, result.stderr)
            with open(results, "rb") as stream:
                return result, stream.read(RESULTS_CAP).decode("utf-8", errors="replace")
        finally:
            results.unlink(missing_ok=True)

    def upload(self, src: Path, dst: str) -> None:
        """Copy a host file or dir to ``dst`` inside: the trial user's in the agent phase, root's
        in the verify phase (the tests: code under test cannot change them)."""
        src = Path(src)
        if not src.exists():
            raise FileNotFoundError(f"upload source {src} does not exist")
        inside = self._inside(dst)
        if inside == "/":
            raise SandboxError("cannot upload onto / in the docker sandbox")
        owner = self._settings.user if self.phase == "agent" else (0, 0)

        def own(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid, info.gid = owner
            info.uname = info.gname = ""
            return info

        with tempfile.TemporaryFile() as buffer:
            with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
                tar.add(src, arcname=inside.lstrip("/"), recursive=True, filter=own)
            buffer.seek(0)
            self._current().put_tar(buffer, "/")

    def download(self, src: str, dst: Path) -> None:
        """Copy ``src`` (inside) to the host path ``dst`` (a file's new path or a dir's). Only
        regular files, dirs and symlinks within ``dst`` come out."""
        inside = self._inside(src)
        dst = Path(dst)
        with tempfile.TemporaryFile() as buffer, tempfile.TemporaryDirectory(prefix="legorl-docker-dl-") as tmp:
            self._current().get_tar(inside, buffer)
            buffer.seek(0)
            with tarfile.open(fileobj=buffer, mode="r:") as tar:
                members = [m for m in tar.getmembers() if _safe(m, tmp)]
                tar.extractall(tmp, members=members, filter="data")
            got = Path(tmp) / posixpath.basename(inside.rstrip("/"))
            if not got.exists() and not got.is_symlink():
                raise FileNotFoundError(f"{inside} could not be copied out of trial {self.trial_id}")
            if got.is_dir() and not got.is_symlink():
                shutil.copytree(got, dst, symlinks=True, dirs_exist_ok=True)
            else:
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(got, dst)

    def endpoint_url(self, host_url: str) -> str:
        """``host_url`` (the proxy on this host's loopback) as the agent reaches it: the same
        path on ``127.0.0.1:relay_port`` inside, relayed through the trial's unix socket."""
        url = urllib.parse.urlsplit(host_url)
        if url.scheme != "http" or url.hostname is None or url.port is None:
            raise SandboxError(f"the docker sandbox relays http://HOST:PORT/... URLs only, got {host_url!r}")
        if url.hostname not in LOOPBACK:
            raise SandboxError(f"the docker sandbox relays only to a proxy on this host's loopback, not {url.hostname}")
        self._upstream = (url.hostname, url.port)
        return urllib.parse.urlunsplit(url._replace(netloc=f"127.0.0.1:{self._relay_port}"))

    def stop(self) -> None:
        """Kill everything, keep the record (/logs), remove the containers and images this
        trial made, its socket and state dir; safe to call twice."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            container, self._container = self._container, None
        try:
            if container is not None:
                container.kill_all()
                self._keep_logs(container, self.phase)
                self._remove(container)
            spare = self._take_spare()
            if spare is not None:
                self._remove(spare)
        finally:
            for thread in list(self._background):
                thread.join()
            for relay in list(self._relays.values()):
                relay.close()
            self._relays.clear()
            for image in self._images:
                self._docker.run("rmi", "--force", image, check=False, timeout=300)
            shutil.rmtree(self._state, ignore_errors=True)

    # ------------------------------------------------------------------ phases

    def provide(self, paths: Sequence[Path]) -> None:
        """Show host ``paths`` read-only at their own paths in the agent phase, from the next
        command on: binds of the agent's container (re-created from a commit of itself when it
        exists already)."""
        new = [Path(os.path.abspath(p)) for p in paths]
        with self._lock:
            new = [p for p in new if p not in self._provided]
            if not new or self.phase != "agent":
                return
            self._provided += new
            container = self._container
            if container is not None:
                self._replace(container)

    def begin_agent(self) -> None:
        """Seal the starting state as it is now (after the before-agent checks)."""
        with self._lock:
            if self._sealed or self.phase != "agent":
                return
            self._sealed = True
            start = time.monotonic()
            container = self._container
            if container is not None:
                self._replace(container, keep_unchanged=True)
            self._start, self._earlier = self._base, []
            self._spare = self._in_background(lambda: self._create("verify", self._start, relay=False, binds=()))
            self.timings["seal"] = time.monotonic() - start

    def begin_verify(self, task: Task) -> dict[str, Any]:
        """End the agent phase; move to a fresh container of the sealed state with only the
        agent's crossing change. Raises :class:`~lego_rl.crossing.CrossingLimit` when the
        agent changed too much (or what the daemon cannot copy)."""
        with self._lock:
            start = time.monotonic()
            container = self._container
            if container is not None and not container.alive():
                raise SandboxError(f"the agent's container {container.name} stopped before verification ({container.ended()}): killed from outside the trial, or its daemon failed")
            killed = container.kill_all() if container is not None else 0
            diff = verify.merge(self._earlier, self._agent_diff(container)) if container is not None else list(self._earlier)
            policy = CrossingPolicy.for_task(task, self.image.roots)
            store = self._state / "crossing"
            store.mkdir(exist_ok=True)
            tree = verify.read_agent_tree(container, diff, policy, store) if container is not None and diff else verify.AgentTree([])
            crossing = policy.decide(tree.changes, tree.is_package)
            fresh = self._take_spare() or self._create("verify", self._start, relay=False, binds=())
            diff_file = (self._record or self._state) / "agent.diff"
            try:
                diff_file.write_text(verify.agent_diff(tree, fresh, policy.roots))
                verify.apply(crossing, tree, fresh, self._settings.user, {p for k, p in diff if k == "added"})
            except BaseException:
                self._remove(fresh)
                raise
            finally:
                shutil.rmtree(store, ignore_errors=True)
            self._container, self.phase, self._provided = fresh, "verify", []
            if container is not None:
                agent = container

                def retire() -> None:
                    self._keep_logs(agent, "agent")
                    self._remove(agent)

                self._in_background(retire)
            self.timings["to_verify"] = time.monotonic() - start
            own = [(k, p) for k, p in diff if any(_under(p, r) for r in self.image.roots)]
            return {
                "agent_diff": str(diff_file),
                "agent_changes": [f"{k[0].upper()} {p}" for k, p in own[:200]],
                "agent_commands_killed": killed,
                "pristine": True,
                "sealed_image": self._start != self.image.tag,
                "crossing": crossing.summary(),
            }

    # ------------------------------------------------------------------ audit

    def changes(self) -> list[Change]:
        """What the trial changed since its starting state (``docker diff``), the file system's
        own dirs left out."""
        with self._lock:
            container = self._container
            diff = verify.merge(self._earlier, self._agent_diff(container)) if container is not None else list(self._earlier)
        return [Change(path, kind) for kind, path in diff if not (kind == "modified" and path in _PARENTS)]

    def writable_roots(self) -> list[str]:
        """The in-sandbox paths the agent can write that persist (in its container): the task's
        files, /logs, $HOME and the scratch dirs."""
        return [*self.image.roots, LOGS, HOME, *SCRATCH]

    def kill_all(self) -> int:
        """Kill every command still running (and all it started); how many there were."""
        container = self._container
        return container.kill_all() if container is not None else 0

    def processes(self, settle: float = 2.0) -> list[int]:
        """Host pids of the trial's processes (but its container's init) once those of ended
        commands had ``settle`` seconds to go."""
        container = self._container
        if container is None:
            return []
        deadline = time.monotonic() + settle
        while (pids := container.processes()) and time.monotonic() < deadline:
            time.sleep(0.02)
        return pids

    def resources_exhausted(self) -> list[dict[str, str]]:
        """The limits the trial's commands ran into: ``phase``, ``limit`` (``name=value``), ``detail``."""
        return self._limits_hit.events()

    def describe(self, task: Task) -> dict[str, Any]:
        s = self._settings
        return {
            "task": task.name,
            "task_path": str(task.path),
            "image": self.image.tag,
            "from_replaced": self.image.replaced,
            "image_built_s": round(self.image.seconds, 3) if self.image.built else None,
            "workdir": self.workdir,
            "roots": list(self.image.roots),
            "user": list(s.user),
            "network": "none",
            "memory_mb": s.memory_mb,
            "cpus": s.cpus,
            "pids_limit": s.pids,
            "storage_bytes": s.storage_bytes,
            "rlimits": s.rlimits,
            "relay_port": self._relay_port,
            "daemon": self._docker.address,
        }

    # ------------------------------------------------------------------ containers

    def _current(self) -> Container:
        with self._lock:
            if self._stopped:
                raise SandboxError(f"trial {self.trial_id} was stopped; no more commands")
            if self._container is None:
                binds = [(str(p), str(p), True) for p in self._provided]
                self._container = self._create("agent", self._base, relay=True, binds=binds)
                self.bound = [*self.bound, *(p for p in self._provided if p not in self.bound)]
            return self._container

    def _create(self, phase: str, image: str, *, relay: bool, binds: Sequence[tuple[str, str, bool]]) -> Container:
        name = f"legorl-{_NAME.sub('-', self.trial_id)[:80]}-{phase}-{next(self._names)}-{secrets.token_hex(2)}"
        run_dir = self._state / name
        run_dir.mkdir(mode=0o700)
        if relay:
            self._relays[name] = SocketRelay(run_dir / "proxy.sock", lambda: self._upstream)
        start = time.monotonic()
        try:
            container = Container(
                self._docker, name, image, run_dir, self._settings, binds=binds,
                relay_port=self._relay_port if relay else 0,
            )  # fmt: skip
        except BaseException:
            relay_of = self._relays.pop(name, None)
            if relay_of is not None:
                relay_of.close()
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        self.timings.setdefault("container_start", time.monotonic() - start)
        if binds:
            self._reachable(container, [target for _, target, _ in binds])
        return container

    @staticmethod
    def _reachable(container: Container, targets: list[str]) -> None:
        """Let the trial user traverse the image's dirs above the binds (e.g. /root, 0700 in
        Debian, above a runtime under /root/.pyenv): search permission, not listing."""
        script = traverse_above(targets)
        if not script:
            return
        out = container.exec(script + "true", timeout=60, cwd="/", user=(0, 0))
        if out.exit_code != 0:
            raise SandboxError(f"could not open the dirs above the harness's files in {container.name}: {out.stderr[-300:]}")

    def _replace(self, container: Container, *, keep_unchanged: bool = False) -> None:
        """Commit ``container`` (if it changed anything) as the base of the next one and remove
        it; ``keep_unchanged``: keep it when it changed nothing (the next one would be the same)."""
        container.kill_all()
        diff = container.diff()
        if any(kind != "modified" or path not in _TRIVIAL for kind, path in diff):  # else only dirs' times
            tag = f"legorl/trial:{secrets.token_hex(8)}"
            container.commit(tag, self._labels)
            self._images.append(tag)
            self._base = tag
            self._earlier = verify.merge(self._earlier, diff)
        elif keep_unchanged:
            return
        self._container = None
        self._in_background(lambda: self._remove(container))

    def _in_background(self, work: Callable[[], Any]) -> Future[Any]:
        """Run ``work`` off the trial's path (stop() waits for it)."""
        done: Future[Any] = Future()

        def run() -> None:
            try:
                done.set_result(work())
            except BaseException as exc:  # noqa: BLE001 - handed to whoever takes the result
                done.set_exception(exc)

        thread = threading.Thread(target=run, daemon=True, name=f"legorl-docker-{self.trial_id}")
        self._background.append(thread)
        thread.start()
        return done

    def _take_spare(self) -> Container | None:
        """The verification container made in advance at the seal, if there is one."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        try:
            return spare.result()
        except Exception:  # noqa: BLE001 - made again where it is needed, failing there
            return None

    def _remove(self, container: Container) -> None:
        container.remove()
        relay = self._relays.pop(container.name, None)
        if relay is not None:
            relay.close()

    def _keep_logs(self, container: Container, phase: str) -> None:
        """Copy ``/logs`` of a phase's container to the trial's record."""
        if self._record is None:
            return
        with contextlib.suppress(Exception):  # noqa: BLE001 - a record is best effort
            with tempfile.TemporaryFile() as buffer:
                container.get_tar(LOGS, buffer)
                buffer.seek(0)
                target = self._record / f"logs-{phase}"
                target.mkdir(parents=True, exist_ok=True)
                with tarfile.open(fileobj=buffer, mode="r:") as tar:
                    tar.extractall(target, members=[m for m in tar.getmembers() if _safe(m, str(target))], filter="data")

    def _agent_diff(self, container: Container) -> list[tuple[ChangeKind, str]]:
        """``docker diff`` of the agent's container; a layer the agent filled to its quota (the
        daemon then cannot diff it) is the agent's resource limit (:class:`ResourceExhausted`),
        not the daemon's failure."""
        try:
            return container.diff()
        except DockerError as exc:
            if not DISK_FULL.search(str(exc)) and "quota exceeded" not in str(exc):
                raise
            self._check_resources(container, None, "Disk quota exceeded")
            limit = f"storage_mb={self._settings.storage_mb}" if self._settings.storage_mb else "storage"
            raise ResourceExhausted(f"{limit} (agent phase: the agent filled the container's storage, the daemon "
                                    f"cannot read its change: {str(exc)[-300:]})") from exc  # fmt: skip

    def _check_resources(self, container: Container, exit_code: int | None, stderr: str = "") -> None:
        """Record the limits the last command (or one beside it) ran into."""
        found = LimitLog.signalled(self._limits, exit_code)
        if self._settings.storage_mb and (full := DISK_FULL.search(stderr[-8192:])):
            found.append((f"storage_mb={self._settings.storage_mb}", f"a command wrote past the container's storage ({full[0]})"))
        values = {"memory_mb": self._settings.memory_mb, "nproc": self._settings.pids}
        found += self._limits_hit.counted(container.cgroup_counters(), values, scope=container.name)
        self._limits_hit.record(self.phase, found)

    def _inside(self, path: str) -> str:
        return "/" + posixpath.normpath(posixpath.join(self.workdir, path)).lstrip("/")


_PARENTS = frozenset({"/", "/var", "/run", "/home", "/logs"})
_TRIVIAL = _PARENTS | {*SCRATCH, HOME, "/logs/agent", "/logs/verifier", "/logs/artifacts"}
"""Dirs whose being modified, and nothing in them, is only their times (checks' scratch files)."""


def _safe(member: tarfile.TarInfo, dest: str) -> bool:
    """Regular files, dirs and symlinks that stay inside ``dest`` (tarfile's data filter)."""
    if not (member.isreg() or member.isdir() or member.issym()):
        return False
    try:
        tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return False
    return True


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")

