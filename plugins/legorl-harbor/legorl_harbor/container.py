"""A trial in one of Harbor's container environments on this host's engine (``type: docker``
or ``podman``), with what lego-rl's trials need that Harbor's config alone does not give:

- **No network, limits.** A Compose overlay (:func:`compose_overlay`) is added to the
  environment's ``extra_docker_compose``: the service and its build get ``network_mode: none``
  (Compose then creates no network); ``limits`` and ``storage_quota`` add a process count,
  rlimits and a quota on the container's writable layer (the task's ``storage_mb``).
- **The harness's files.** Harbor fixes mounts when a container starts, so the environment is
  started by the first command, upload or download: the paths :meth:`provide` names by then
  (the trial runner names them right after start) are read-only binds at their own paths.
- **The proxy.** A root-only directory of the trial (one per phase) is bound at :data:`RUN`;
  the agent's holds a unix socket whose host end relays to the proxy
  (:class:`~legorl_std.sandbox.netforward.SocketRelay`) and the container's PID 1
  (:data:`~legorl_std.sandbox.netforward.CONTAINER_INIT`, on the image's ``python3``), which
  reaps orphans and relays its loopback port :data:`RELAY_PORT` to that socket. The harness is
  told ``http://127.0.0.1:RELAY_PORT/...``.
- **Kills.** :meth:`kill_all` kills every process but PID 1, as root.
- **Limits hit.** After each command, :meth:`resources_exhausted` learns which limit stopped it:
  its exit code (an rlimit's signal), its stderr (a full storage quota) and the counters of the
  container's cgroups (OOM kills, refused forks) that its init reads on request.
- **Pristine verification.** :meth:`begin_agent` keeps a host copy of the working tree;
  :meth:`begin_verify` compares the agent's with it, stops the agent's environment and starts a
  fresh one of the task's image (no harness files, the proxy's socket closed) whose working
  tree becomes the starting state with only the crossed change (:mod:`legorl_harbor.pristine`).
  That container is started while the agent works (``prestart_verify``): it needs nothing of
  the agent phase, and verification then waits for no container start.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import secrets
import shlex
import shutil
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from harbor.environments.base import BaseEnvironment
from harbor.models.trial.config import ServiceVolumeConfig
from legorl_std.sandbox import image_needs
from legorl_std.sandbox.limits import CPU_GRACE_SECONDS, DISK_FULL, MB, LimitLog, Limits, limit_label
from legorl_std.sandbox.mounts import traverse_above
from legorl_std.sandbox.netforward import CONTAINER_INIT, SocketRelay, unix_request
from legorl_std.sandbox.reap import KILL_OTHERS
from legorl_std.sandbox.snapshot import Change

from lego_rl.crossing import CrossingLimit
from lego_rl.data import SandboxFailure
from lego_rl.kinds import ExecResult, Task
from legorl_harbor import pristine
from legorl_harbor.loop import LoopThread
from legorl_harbor.sandbox import LOOPBACK, HarborSandbox, HarborSandboxError, HarborSandboxOptions

RUN = "/run/legorl"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""Where Harbor's ``bash -c`` is found: the agent's user cannot write there."""
AGENT_USER = """u={uid}; w={workdir}
grep -q "^[^:]*:[^:]*:$u:" /etc/passwd || echo "legorl-agent:x:$u:$u:lego-rl agent:/home/legorl-agent:/bin/sh" >> /etc/passwd
grep -q "^[^:]*:[^:]*:$u:" /etc/group || echo "legorl-agent:x:$u:" >> /etc/group
mkdir -p /home/legorl-agent && chown "$u:$u" /home/legorl-agent && chown -R "$u:$u" "$w"
"""
"""Make the agent's user (a line of /etc/passwd: no tool of the image needed), owning the
working tree and its home."""
STDERR_APART = """__e=$(mktemp -p /dev/shm 2>/dev/null || mktemp 2>/dev/null) && exec 2>"$__e" && \\
  trap 'PATH={system}; printf "\\n%s\\n" {mark}; cat "$__e" 2>/dev/null; rm -f "$__e"' EXIT
export PATH={path}
{command}"""
"""A command with its stderr apart from stdout, in the same shell (no process of ours beside
it): held in a memory file and printed after ``mark`` (random) when the shell exits. Where the
file cannot be made, or the command replaces the trap or the shell, the streams stay as
Harbor gives them (together)."""
MARK = "/var/lib/legorl-start"
"""A root-only dir whose ``start`` file's time is the agent phase's start (ctime: no process can
set it back)."""
WRITABLE = r"""find / -xdev \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type d \( -perm -0002 -o -uid {uid} \) -print -prune"""
"""The topmost dirs the agent's user can write (world-writable or its own), on the container's
own file system (not the read-only binds)."""
RELAY_PORT = 18080
KILL_TIMEOUT_S = 60
Opener = Callable[[list[ServiceVolumeConfig], str], tuple[BaseEnvironment, str]]
"""Creates and starts the trial's environment of a phase ('' or 'verify') with these extra
mounts; it and its workdir."""


def compose_overlay(path: Path, limits: Limits | None, storage_mb: int | None) -> Path:
    """Write the Compose overlay of a trial's container to ``path``: no network for the service
    nor its build (the classic builder, ``DOCKER_BUILDKIT=0``, holds that for every RUN), the
    relaying init as PID 1 (Harbor's ``sh -c "sleep infinity"`` reaps no orphan); with
    ``limits``, the container's process count and every process's rlimits (Harbor sets its
    memory and CPUs); with ``storage_mb``, a quota on its writable layer."""
    service: dict[str, Any] = {
        "network_mode": "none",
        "build": {"network": "none"},
        "command": ["python3", "-I", "-S", f"{RUN}/init.py", str(RELAY_PORT)],
    }
    if limits is not None:
        if limits.nproc:
            service["pids_limit"] = limits.nproc
        rlimits = {
            "nofile": limits.open_files and (limits.open_files, limits.open_files),
            "fsize": limits.file_size_mb and (limits.file_size_mb * MB, limits.file_size_mb * MB),
            "cpu": limits.cpu_seconds and (limits.cpu_seconds, limits.cpu_seconds + CPU_GRACE_SECONDS),
        }
        service["ulimits"] = {
            name: {"soft": soft, "hard": hard} for name, pair in rlimits.items() if pair for soft, hard in [pair]
        }
    if storage_mb:
        service["storage_opt"] = {"size": f"{storage_mb}M"}
    path.write_text(json.dumps({"services": {"main": service}}, indent=2))  # JSON is YAML
    return path


def bind(source: Path | str, target: str, *, read_only: bool = True) -> ServiceVolumeConfig:
    """A bind mount of ``source`` at ``target``, read-only unless said."""
    mount: ServiceVolumeConfig = {"type": "bind", "source": str(source), "target": target}
    if read_only:
        mount["read_only"] = True
    return mount


class ContainerHarborSandbox(HarborSandbox):
    """A Harbor container environment started at its first use (see the module)."""

    def __init__(
        self,
        open_environment: Opener,
        loop: LoopThread,
        options: HarborSandboxOptions,
        trial_dir: Path,
        own: Sequence[str] = (),
        caps: Mapping[str, float | None] | None = None,
        task: str = "",
    ):
        """``caps``: the values of the limits the container runs under (``memory_mb``,
        ``storage_mb``; ``nproc`` and the rlimits come from the options); ``task``: its name,
        for errors."""
        self._task = task
        self._open = open_environment
        self._loop = loop
        self._options = options
        self._stopped = False
        self._lock = threading.Lock()
        self._mounts: list[ServiceVolumeConfig] = []
        self._failed: str | None = None
        """Why the environment did not start (every later use fails with it)."""
        self._environment: BaseEnvironment | None = None
        self._prestarted: tuple[str, Future[tuple[BaseEnvironment, str, str]]] | None = None
        """A later phase's environment starting (or started) ahead: the phase, (it, its
        workdir, its image's PATH)."""
        self._workdir = ""
        self._phase = ""
        self._image_path = SYSTEM_PATH
        self._roots: list[str] = []
        self._own = list(own)
        self._initial: set[str] = set()
        self._removed: list[str] = []
        self._start: Path | None = None
        self._state = trial_dir / "pristine"
        self._trial_dir = trial_dir
        self._upstream: tuple[str, int] | None = None
        self._relay = SocketRelay(self._run_dir("") / "proxy.sock", lambda: self._upstream)
        limits = options.limits
        self._caps = {"nproc": limits.nproc if limits else None, **(caps or {})}
        self._limits_hit = LimitLog()

    def _run_dir(self, phase: str) -> Path:
        """The phase's directory bound at :data:`RUN`: its init and control socket (and, for the
        agent's, the proxy's socket); made on first use."""
        path = self._trial_dir / (f"run-{phase}" if phase else "run")
        if not path.is_dir():
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            shutil.copyfile(CONTAINER_INIT, path / "init.py")
        return path

    @property
    def workdir(self) -> str:
        self._started()
        return self._workdir

    @workdir.setter
    def workdir(self, value: str) -> None:
        self._workdir = value

    def provide(self, paths: Sequence[Path]) -> None:
        with self._lock:
            if self._environment is not None:
                raise HarborSandboxError(
                    "the harness's files must be provided before the first command: Harbor binds mounts at start"
                )
            self._mounts += [bind(path, str(path)) for path in paths]

    def endpoint_url(self, host_url: str) -> str:
        url = urllib.parse.urlsplit(host_url)
        if url.scheme != "http" or url.hostname not in LOOPBACK or not url.port:
            raise HarborSandboxError(
                f"the harbor sandbox relays only http://127.0.0.1:PORT/... of this host's proxy, got {host_url!r}"
            )
        self._upstream = (url.hostname, url.port)
        return urllib.parse.urlunsplit(url._replace(netloc=f"127.0.0.1:{RELAY_PORT}"))

    def kill_all(self) -> int:
        """Kill every process but PID 1: asked of the container's init on its control socket (it
        needs no new process, so it works where the agent used up the container's), else by a
        root shell."""
        if self._environment is None:
            return 0
        try:
            return int(unix_request(self._control, b"kill\n", timeout=KILL_TIMEOUT_S))
        except (OSError, ValueError):
            words = self._root(KILL_OTHERS).split()
            return int(words[-1]) if words and words[-1].isdigit() else 0

    @property
    def _control(self) -> Path:
        """The control socket of the current phase's container init."""
        return self._run_dir(self._phase) / "control.sock"

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._relay.close()
        with self._lock:  # after a start under way
            prestarted, self._prestarted = self._prestarted, None
            environment = self._environment
        delete = self._options.environment.delete
        if prestarted is not None and prestarted[1].exception() is None:  # waits for its start
            self._loop.run(prestarted[1].result()[0].stop(delete=delete))
        if environment is not None:
            self._loop.run(environment.stop(delete=delete))

    def _launch(self, phase: str, mounts: list[ServiceVolumeConfig]) -> tuple[BaseEnvironment, str, str]:
        """Create and start ``phase``'s environment with ``mounts`` and its run directory, and
        prepare it: it, its workdir, its image's PATH."""
        environment, workdir = self._open([*mounts, bind(self._run_dir(phase), RUN, read_only=False)], phase)
        try:
            return environment, workdir, self._prepare(environment, phase, workdir, mounts)
        except BaseException:
            self._loop.run(environment.stop(delete=self._options.environment.delete))
            raise

    def _prestart(self, phase: str) -> None:
        """Start ``phase``'s environment (no harness files) on a thread of its own; the phase's
        first use takes it."""
        future: Future[tuple[BaseEnvironment, str, str]] = Future()

        def launch() -> None:
            try:
                future.set_result(self._launch(phase, []))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever takes it
                future.set_exception(exc)

        with self._lock:
            self._prestarted = (phase, future)
        threading.Thread(target=launch, name=f"legorl-harbor-prestart-{phase}", daemon=True).start()

    def _started(self) -> BaseEnvironment:
        with self._lock:
            if self._stopped:
                raise HarborSandboxError("the trial's environment was stopped")
            if self._failed is not None:
                raise SandboxFailure(self._failed)
            if self._environment is None:
                ahead = self._prestarted if self._prestarted and self._prestarted[0] == self._phase else None
                if ahead is not None:  # another phase's stays for stop() to end
                    self._prestarted = None
                try:
                    if ahead is not None:
                        self._environment, self._workdir, self._image_path = ahead[1].result()
                    else:
                        self._environment, self._workdir, self._image_path = self._launch(
                            self._phase, self._mounts
                        )
                    if not self._phase:
                        self._initial = self._outside_files(self._environment)
                except Exception as exc:
                    what = image_needs.lacking(str(exc))
                    self._failed = (
                        image_needs.message("harbor", self._task, what)
                        if what is not None
                        else f"the trial's environment did not start: {type(exc).__name__}: {exc}"
                    )
                    raise SandboxFailure(self._failed) from exc
            return self._environment

    def begin_agent(self) -> None:
        if self.workdir == "/":
            raise HarborSandboxError(
                "the task's working directory is / (its image has no WORKDIR, or Harbor ran a prebuilt "
                "image instead of its Dockerfile): pristine verification copies the working tree"
            )
        start = self._download_tree("start", HarborSandboxError)
        self._removed = _topmost(self._initial - self._outside_files(self._started()))
        self._root(f"mkdir -p -m 700 {MARK} && touch {MARK}/start")
        self._start = start
        if self._options.prestart_verify:
            self._prestart("verify")

    def begin_verify(self, task: Task) -> dict[str, Any]:
        began = time.monotonic()
        if self._start is None:
            raise HarborSandboxError("verification began before the agent phase (begin_agent)")
        killed = self.kill_all()
        workdir, agent = self.workdir, self._download_tree("agent", CrossingLimit)
        change = pristine.agent_change(task, workdir, self._start, agent)
        (self._state / "agent.diff").write_text(change.diff)
        tree = self._state / "verify"
        pristine.verification_tree(change, workdir, self._start, agent, tree)
        self._reopen("verify")
        removed = " ".join(shlex.quote(path) for path in self._removed)  # as before the agent
        self._root(f"find {shlex.quote(workdir)} -mindepth 1 -delete" + (f" && rm -rf -- {removed}" if removed else ""))
        self._loop.run(self._started().upload_dir(tree, workdir))
        for done in (agent, tree):
            shutil.rmtree(done, ignore_errors=True)
        return {
            "agent_diff": str(self._state / "agent.diff"),
            "agent_changes": [
                f"{c.kind[0].upper()} {posixpath.join(workdir, c.path.lstrip('/'))}" for c in change.changes[:200]
            ],
            "agent_commands_killed": killed,
            "pristine": True,
            "crossing": change.crossing.summary(),
            "to_verify_s": round(time.monotonic() - began, 3),
        }

    def _download_tree(self, name: str, too_big: type[Exception]) -> Path:
        """A host copy of the working tree at ``<trial>/pristine/<name>``; ``too_big`` is raised
        when it holds more than the ``tree_limit_mb`` option."""
        environment, limit = self._started(), self._options.tree_limit_mb
        words = self._root(f"du -skx {shlex.quote(self.workdir)}").split()
        if not words or not words[0].isdigit():
            raise SandboxFailure(f"cannot measure the working tree {self.workdir}: {words}")
        if int(words[0]) > limit * 1024:
            raise too_big(
                f"the working tree {self.workdir} holds {int(words[0]) // 1024} MB (at most {limit} MB are copied)"
            )
        target = self._state / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        self._loop.run(environment.download_dir(self.workdir, target))
        return target

    def _reopen(self, phase: str) -> None:
        """Stop the environment; the next use starts a fresh one for ``phase``, without the
        harness's files, and the proxy's host end closed."""
        self._relay.close()
        with self._lock:
            environment, self._environment = self._environment, None
            self._mounts, self._phase = [], phase
        if environment is not None:
            self._loop.run(environment.stop(delete=self._options.environment.delete))

    def exec(
        self,
        command: str,
        *,
        timeout: float,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        """``command`` through the system's bash (Harbor runs ``bash -c``, found on the exec's
        PATH) with the caller's or the image's PATH restored for the command itself; as the
        agent's user from :meth:`begin_agent` to verification, root before it (the before-agent
        checks), the image's user in verification. Harbor's docker exec merges stderr into
        stdout: the command's stderr is held in a memory file and printed after a random mark."""
        path = (env or {}).get("PATH") or self._image_path
        mark = f"@@legorl-stderr-{secrets.token_hex(8)}"
        inside = STDERR_APART.format(path=shlex.quote(path), command=command, mark=mark, system=SYSTEM_PATH)
        user = (
            self._options.agent_uid
            if self._phase == "" and self._start is not None
            else ("root" if not self._phase else None)
        )
        done = self._exec(inside, timeout=timeout, env={**(env or {}), "PATH": SYSTEM_PATH}, cwd=cwd, user=user)
        out, found, err = done.stdout.rpartition(f"\n{mark}\n")
        done = dataclasses.replace(done, stdout=out, stderr=err + done.stderr) if found else done
        self._check_resources(done)
        return done

    def resources_exhausted(self) -> list[dict[str, str]]:
        """The limits the trial's commands ran into: ``phase``, ``limit`` (``name=value``), ``detail``."""
        return self._limits_hit.events()

    def _check_resources(self, done: ExecResult) -> None:
        """Record the limits the last command (or one beside it) ran into."""
        found = LimitLog.signalled(self._options.limits, done.exit_code)
        if self._options.storage_quota and (full := DISK_FULL.search((done.stderr + done.stdout)[-8192:])):
            storage = limit_label("storage_mb", self._caps.get("storage_mb"))
            found.append((storage, f"a command wrote past the container's storage ({full[0]})"))
        found += self._limits_hit.counted(self._counters(), self._caps, scope=self._phase)
        self._limits_hit.record("verify" if self._phase else "agent", found)

    def _counters(self) -> dict[str, int]:
        """Limit name -> how often the container's cgroups counted it (its init reads them)."""
        if self._environment is None:
            return {}
        try:
            answer = unix_request(self._control, b"counters\n", timeout=KILL_TIMEOUT_S)
        except OSError:
            return {}
        lines = (line.partition(" ") for line in answer.decode(errors="replace").splitlines())
        return {name: int(count) for name, _, count in lines if count.isdigit()}

    def _prepare(
        self, environment: BaseEnvironment, phase: str, workdir: str, mounts: list[ServiceVolumeConfig]
    ) -> str:
        """As root, before anything of the agent runs: the agent's user, who may traverse the
        image's dirs above the harness's mounts (/root is 0700 in Debian; agent phase); the
        image's PATH."""
        uid = self._options.agent_uid
        script = ""
        if uid and not phase:
            script = AGENT_USER.format(uid=uid, workdir=shlex.quote(workdir))
            script += traverse_above(m["target"] for m in mounts)
            script += WRITABLE.format(uid=uid) + " | sed 's/^/root /'\n"
        done = self._loop.run(environment.exec(script + 'echo "path $PATH"', user="root", timeout_sec=KILL_TIMEOUT_S))
        if done.return_code != 0:
            raise HarborSandboxError(
                f"cannot prepare the container (exit {done.return_code}): {(done.stderr or done.stdout or '')[-1000:]}"
            )
        lines = (done.stdout or "").splitlines()  # Harbor may merge stderr into it
        if uid and not phase:
            self._roots = [line[5:] for line in lines if line.startswith("root /")]
        return next((line[5:] for line in reversed(lines) if line.startswith("path /")), SYSTEM_PATH)

    def writable_roots(self) -> list[str]:
        """The dirs the agent's user can write (found when the container started), and where
        the task's Dockerfile put its own files (what the agent may read there, the scans see)."""
        self._started()
        return sorted({*self._roots, *self._own})

    def changes(self) -> list[Change]:
        """Files changed since :meth:`begin_agent` under the writable roots (their ctime), and the
        working tree's files deleted since (against its starting copy). What still runs of the
        agent phase is killed first."""
        if self._start is None or not self._roots:
            return []
        self.kill_all()  # the agent phase is over; what it left running could hold every process
        roots = " ".join(shlex.quote(r) for r in self._roots)
        workdir = self.workdir
        listing = self._root(
            f"find {roots} -xdev \\( -type f -o -type l \\) -cnewer {MARK}/start -printf 'C %p\\0'; "
            f"find {shlex.quote(workdir)} -xdev \\( -type f -o -type l \\) -printf 'W %P\\0'"
        )
        entries = [e for e in listing.split("\0") if e[:2] in ("C ", "W ")]
        present = {e[2:] for e in entries if e[0] == "W"}
        started = {
            os.path.relpath(os.path.join(d, f), self._start) for d, _, files in os.walk(self._start) for f in files
        }
        found = []
        for kind, path in ((e[0], e[2:]) for e in entries):
            if kind == "C":
                inside = path.startswith(workdir.rstrip("/") + "/") and posixpath.relpath(path, workdir) in started
                found.append(Change(path, "modified" if inside else "added"))
        found += [Change(posixpath.join(workdir, rel), "deleted") for rel in sorted(started - present)]
        return found

    def _root(self, script: str) -> str:
        """Run ``script`` as root in the current environment (see :meth:`_run_root`)."""
        return self._run_root(self._started(), script)

    def _run_root(self, environment: BaseEnvironment, script: str) -> str:
        """Run ``script`` as root in ``environment``, Harbor's ``bash`` and every tool found on
        the system's PATH (never where the agent can write); its output (raises on failure)."""
        call = environment.exec(script, user="root", env={"PATH": SYSTEM_PATH}, timeout_sec=KILL_TIMEOUT_S)
        done = self._loop.run(call)
        if done.return_code != 0:
            raise SandboxFailure(
                f"a command of the sandbox failed (exit {done.return_code}): {(done.stderr or done.stdout or '')[-1000:]}"
            )
        return done.stdout or ""

    def _outside_files(self, environment: BaseEnvironment) -> set[str]:
        """The paths under the task's own paths outside the working tree (what the before-agent
        checks may remove there, e.g. a copy of the repository, verification removes too)."""
        workdir = self._workdir.rstrip("/") + "/"
        outside = [r for r in self._own if r != "/" and not (r + "/").startswith(workdir)]
        if not outside:
            return set()
        quoted = " ".join(shlex.quote(r) for r in outside)
        listing = self._run_root(environment, f"find {quoted} -xdev -print0 2>/dev/null; true")
        return {path for path in listing.split("\0") if path.startswith("/")}


def _topmost(paths: set[str]) -> list[str]:
    """``paths`` without those under another of them."""
    kept: list[str] = []
    for path in sorted(paths):
        if not kept or not path.startswith(kept[-1].rstrip("/") + "/"):
            kept.append(path)
    return kept
