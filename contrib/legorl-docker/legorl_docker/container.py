"""One container of a trial: created with no network, its commands run through ``docker exec``
and tracked on the host, so a timeout (or a command's end) kills exactly its process tree.

Each container has a root-only host dir bound at ``/run/legorl`` (:data:`RUN`): the in-container
scripts (:mod:`legorl_docker.inside`), one spec per command, the pid each command's wrapper
writes, and result streams. The host finds a command's process by that pid among the shim's
children, waits on it with a pidfd, and kills its tree at the timeout; when it ends, whatever it
left (the init's children) is killed too, as a command's PID namespace would take it along.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from legorl_std.sandbox.commands import TIMEOUT_EXIT, tail

from lego_rl.crossing import ChangeKind
from lego_rl.data import SandboxFailure
from lego_rl.kinds import RESULTS_FD_ENV, ExecResult
from legorl_docker import procs
from legorl_docker.cli import Docker, DockerError
from legorl_docker.inside import EXEC, INIT

RUN = "/run/legorl"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The container's own PATH (the trial's commands get theirs from the image, per exec)."""
CLIENT_GRACE = 10.0
"""Seconds the docker client may take to return once its command's processes are gone."""
RESULTS_CAP = 8 << 20


class SandboxError(SandboxFailure):
    """The container could not be made or used (infrastructure, not the policy): the trial
    ends ``sandbox_error``."""


@dataclass
class Settings:
    """What every container of a trial is created with."""

    user: tuple[int, int]
    memory_mb: float | None = None
    cpus: float | None = None
    pids: int | None = 512
    storage_bytes: int | None = None
    """The container's quota (the task's storage, plus the image where the quota counts it)."""
    storage_mb: int | None = None
    """The task's storage_mb that quota enforces (what a full disk is reported as)."""
    rlimits: dict[str, tuple[int, int]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    """Every command's environment before its own (PATH, HOME, ...)."""


class Container:
    """A created, started container; commands via :meth:`exec`. ``remove()`` ends it."""

    def __init__(
        self,
        docker: Docker,
        name: str,
        image: str,
        run_dir: Path,
        settings: Settings,
        *,
        binds: Sequence[tuple[str, str, bool]] = (),
        relay_port: int = 0,
    ):
        self.docker = docker
        self.name = name
        self.image = image
        self.run_dir = run_dir
        self.settings = settings
        self.binds = list(binds)
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._live: dict[int, int] = {}
        """exec number -> host pid of its root process, while it runs."""
        self._clients: set[subprocess.Popen[bytes]] = set()
        self._removing = False
        self._as_root = os.geteuid() == 0
        for sub in ("exec", "results"):
            (run_dir / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(run_dir, 0o700)
        shutil.copyfile(INIT, run_dir / "init.py")
        shutil.copyfile(EXEC, run_dir / "exec.py")
        argv = self._create_argv(relay_port)
        self.id = name
        try:
            self.id = docker.text(*argv, timeout=120)
            state = json.loads(docker.text("inspect", "--format", "{{json .State}}", self.id))
            self.init_pid = int(state["Pid"])
            self.init_started = procs.start_time(self.init_pid)
            self.shim_pid = procs.parent(self.init_pid)
            self.pidns = procs.pidns(self.init_pid)
        except Exception:
            self.remove()
            raise

    def _create_argv(self, relay_port: int) -> list[str]:
        s = self.settings
        argv = [
            "run", "--detach", "--pull", "never", "--network", "none", "--name", self.name,
            "--hostname", "sandbox", "--cap-drop", "ALL",
            *[f"--cap-add={c}" for c in ("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL")],
            "--security-opt", "no-new-privileges",
            "--mount", f"type=bind,source={self.run_dir},target={RUN}",
            "--env", f"PATH={SYSTEM_PATH}",  # what docker exec finds our python3 and kill on: never the trial's PATH
            "--entrypoint", "python3",
        ]  # fmt: skip
        for source, target, read_only in self.binds:
            argv += ["--mount", f"type=bind,source={source},target={target}{',readonly' if read_only else ''}"]
        if s.memory_mb:
            argv += ["--memory", f"{int(s.memory_mb)}m", "--memory-swap", f"{int(s.memory_mb)}m"]
        if s.cpus:
            argv += ["--cpus", f"{s.cpus:g}"]
        if s.pids:
            argv += ["--pids-limit", str(s.pids)]
        if s.storage_bytes:
            argv += ["--storage-opt", f"size={s.storage_bytes}"]
        for key, value in s.labels.items():
            argv += ["--label", f"{key}={value}"]
        return [*argv, self.image, "-I", "-S", f"{RUN}/init.py", str(relay_port)]

    # ------------------------------------------------------------------ commands

    def exec(
        self,
        command: str,
        *,
        timeout: float,
        env: dict[str, str] | None = None,
        cwd: str,
        results: Path | None = None,
        user: tuple[int, int] | None = None,
    ) -> ExecResult:
        """Run ``bash -c command`` as the trial's user (or ``user``); ``results``: a host file in
        this container's run dir, open as ``$LEGORL_RESULTS_FD`` for the command."""
        n = next(self._counter)
        uid, gid = user or self.settings.user
        rlimits = " ".join(f"{name}:{soft}:{hard}" for name, (soft, hard) in self.settings.rlimits.items())
        fields = [command, cwd, str(uid), str(gid), f"{RUN}/results/{results.name}" if results else "", RESULTS_FD_ENV, rlimits]
        fields += [f"{k}={v}" for k, v in {**self.settings.env, **(env or {})}.items() if "\0" not in k + v]
        spec_path = self.run_dir / "exec" / f"{n}.spec"
        fd = os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
            f.write("\0".join(fields))
        pid_path = self.run_dir / "exec" / f"{n}.pid"
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            start = time.monotonic()
            client = self.docker.popen(
                "exec", "--user", "0:0", "--workdir", "/", self.id, "python3", "-I", "-S", f"{RUN}/exec.py", str(n),
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
            )  # fmt: skip
            with self._lock:
                self._clients.add(client)
            try:
                started, timed_out = self._follow(n, client, pid_path, start + timeout)
            finally:
                with self._lock:
                    self._clients.discard(client)
                    self._live.pop(n, None)
                self._kill_leftovers()
                code = _wait_client(client)
                spec_path.unlink(missing_ok=True)
                pid_path.unlink(missing_ok=True)
            seconds = time.monotonic() - start
            stdout, stderr = tail(out), tail(err)
        if not self.alive():
            raise SandboxError(f"container {self.name} stopped under the command ({self.ended()}): it was killed from outside the trial, or its daemon failed")
        if not started and not timed_out:
            raise SandboxError(f"container {self.name} did not run the command (docker exec exit {code}): {stderr.strip()[-800:]}")
        if timed_out or code is None:
            code = TIMEOUT_EXIT
        elif code < 0:
            code = 128 - code
        return ExecResult(code, stdout, stderr, timed_out, seconds)

    def _follow(self, n: int, client: subprocess.Popen[bytes], pid_path: Path, deadline: float) -> tuple[bool, bool]:
        """Follow command ``n`` until it ends or ``deadline`` passes (then its tree is killed):
        (whether its wrapper started, whether it timed out)."""
        started, root = False, None
        while root is None and time.monotonic() < deadline:
            if not started:
                with contextlib.suppress(OSError, ValueError):
                    inner = int(pid_path.read_text())
                    started = True
            if started:
                root = procs.exec_root(self.shim_pid, self.pidns, inner)
                if root is not None:
                    with self._lock:
                        self._live[n] = root
                    break
            if client.poll() is not None:
                return started or pid_path.exists(), False  # ended before it was found
            time.sleep(0.001)
        if root is None:  # past the deadline before it could be followed
            self._kill_all_commands()
            return started, True
        if procs.wait_exit(root, max(0.0, min(deadline - time.monotonic(), 2**31 / 1000))):
            return True, False
        self._kill(lambda: procs.tree(root))
        return True, True

    def _kill_leftovers(self) -> None:
        """After a command: kill what it left behind (the init's children, but for the trees
        of commands still running)."""
        with self._lock:
            keep = set(self._live.values())
        self._kill(lambda: procs.leftovers(self.init_pid, keep))

    def _kill(self, collect: Callable[[], list[int]]) -> int:
        if self._as_root:
            return procs.kill_trees(collect)
        pids = [ids[-1] for ids in map(procs.nspid, collect()) if ids]
        if pids:
            self.docker.run("exec", "--user", "0:0", self.id, "kill", "-9", *map(str, pids), check=False, timeout=60)
        return len(pids)

    def _kill_all_commands(self) -> int:
        """Kill every process but the init."""
        return self._kill(self.processes)

    def kill_all(self) -> int:
        """Kill every command still running and all it started; how many commands there were."""
        with self._lock:
            live = len(self._live)
        self._kill_all_commands()
        return live

    def processes(self) -> list[int]:
        """Host pids of the container's processes but its init."""
        roots = procs.commands(self.shim_pid, self.init_pid, self.pidns)
        return [p for root in roots for p in procs.tree(root)] + procs.leftovers(self.init_pid, set())

    def alive(self) -> bool:
        """Whether the container's init still runs (or we are removing it ourselves)."""
        return self._removing or procs.running(self.init_pid, self.init_started)

    def ended(self) -> str:
        """How the container's init ended, as the daemon tells (exit code, OOM kill, error)."""
        try:
            self.docker.run("wait", self.id, check=False, timeout=60)  # until the daemon saw the end
            state = json.loads(self.docker.text("inspect", "--format", "{{json .State}}", self.id, timeout=60))
        except (DockerError, ValueError) as exc:
            return f"the daemon cannot say: {str(exc)[-200:]}"
        said = [f"status {state.get('Status')}", f"exit code {state.get('ExitCode')}"]
        said += ["OOM-killed"] if state.get("OOMKilled") else []
        said += [f"error {state['Error']}"] if state.get("Error") else []
        return ", ".join(said)

    # ------------------------------------------------------------------ files

    def put_tar(self, tar: IO[bytes], dest: str = "/") -> None:
        """Extract a tar stream at ``dest``, its owners and modes kept (``--archive`` would
        instead chown everything to the image's USER)."""
        self.docker.run("cp", "-", f"{self.id}:{dest}", stdin=tar, timeout=600)

    def get_tar(self, src: str, out: IO[bytes]) -> None:
        """``src`` as a tar stream into ``out``; FileNotFoundError when it does not exist."""
        with tempfile.TemporaryFile() as err:
            proc = self.docker.popen("cp", f"{self.id}:{src}", "-", stdin=subprocess.DEVNULL, stdout=out, stderr=err)
            code = proc.wait(timeout=600)
            if code != 0:
                err.seek(0)
                message = err.read().decode(errors="replace").strip()
                if "Could not find the file" in message or "No such container:path" in message:
                    raise FileNotFoundError(f"{src} does not exist in container {self.name}")
                raise DockerError(["docker", "cp", f"{self.name}:{src}", "-"], code, message)

    def diff(self) -> list[tuple[ChangeKind, str]]:
        """(kind, path) of what changed since the image: added | modified | deleted."""
        kinds: dict[str, ChangeKind] = {"A": "added", "C": "modified", "D": "deleted"}
        found: list[tuple[ChangeKind, str]] = []
        for line in self.docker.text("diff", self.id, timeout=600).splitlines():
            mark, _, path = line.partition(" ")
            if mark in kinds and path:
                found.append((kinds[mark], path))
        return found

    def commit(self, tag: str, labels: dict[str, str]) -> str:
        changes = [arg for key, value in labels.items() for arg in ("--change", f"LABEL {key}={value}")]
        return self.docker.text("commit", "--pause=true", *changes, self.id, tag, timeout=600)

    def cgroup_counters(self) -> dict[str, int]:
        """``memory_mb``: OOM kills, ``nproc``: refused forks (from the container's cgroups)."""
        found: dict[str, int] = {}
        try:
            lines = Path(f"/proc/{self.init_pid}/cgroup").read_text().splitlines()
        except OSError:
            return found
        for line in lines:
            _, names, path = line.split(":", 2)
            for name, file, field_name, key in (
                ("memory", "memory.oom_control", "oom_kill", "memory_mb"),
                ("pids", "pids.events", "max", "nproc"),
            ):
                if name in names.split(",") or (names == "" and Path("/sys/fs/cgroup", path.lstrip("/"), file).exists()):
                    base = Path("/sys/fs/cgroup") / (name if names else "") / path.lstrip("/")
                    if names == "" and name == "memory":
                        file, field_name = "memory.events", "oom_kill"
                    with contextlib.suppress(OSError, ValueError):
                        for entry in (base / file).read_text().splitlines():
                            parts = entry.split()
                            if len(parts) == 2 and parts[0] == field_name:
                                found[key] = int(parts[1])
        return found

    def remove(self) -> None:
        """Kill everything and delete the container (and its run dir)."""
        with self._lock:
            self._removing = True
            clients = list(self._clients)
        for client in clients:
            with contextlib.suppress(OSError):
                client.kill()
        self.docker.run("rm", "--force", "--volumes", self.name, check=False, timeout=300)
        shutil.rmtree(self.run_dir, ignore_errors=True)


def _wait_client(client: subprocess.Popen[bytes]) -> int | None:
    try:
        return client.wait(timeout=CLIENT_GRACE)
    except subprocess.TimeoutExpired:
        client.kill()
        client.wait()
        return None
