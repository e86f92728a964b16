"""Sandbox ``harbor``: one trial in any Harbor environment, driven through Harbor's Python API.

``environment`` is Harbor's own trial environment config: ``type`` (docker, kubernetes, modal,
daytona, e2b, ...) or ``import_path``, its ``kwargs``, ``mounts``, ``extra_docker_compose`` and
resource overrides. The default is :class:`legorl_harbor.bwrap.BwrapEnvironment`, which needs
no Docker. Harbor's API is async; each backend drives it from one private event-loop thread.

The working directory is what the environment reports for ``pwd`` at start (the image's
WORKDIR). A command past its timeout is reported as timed out (exit 124) whether the
environment raised or returned. The proxy is reached through the bubblewrap environment's own
relay; on a local container engine (``type: docker | podman``) through a unix socket mounted
into the container (:mod:`legorl_harbor.container`, which also mounts the harness's files);
elsewhere at ``host_address`` (the host as the environment sees it).
"""

from __future__ import annotations

import asyncio
import math
import posixpath
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harbor.environments.base import BaseEnvironment
from harbor.models.trial.config import EnvironmentConfig
from legorl_std.sandbox.commands import TIMEOUT_EXIT
from legorl_std.sandbox.limits import Limits
from legorl_std.sandbox.snapshot import Change
from pydantic import BaseModel, ConfigDict, Field

from lego_rl.kinds import ExecResult, Task
from legorl_harbor.bwrap import BwrapEnvironment
from legorl_harbor.loop import LoopThread

BWRAP = "legorl_harbor.bwrap:BwrapEnvironment"
GRACE_S = 30.0
"""How long past a command's timeout we wait for the environment to give up by itself."""
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})


class HarborSandboxError(RuntimeError):
    """The Harbor environment could not be built or used."""


class HarborSandboxOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    environment: EnvironmentConfig = Field(
        default_factory=lambda: EnvironmentConfig(import_path=BWRAP),
        description="Harbor's environment config: type (docker, modal, ...) or import_path, "
        "kwargs, overrides (default: the bubblewrap environment, no Docker needed).",
    )
    root: str | None = Field(
        default=None, description="Directory of per-trial dirs (default: <run dir>/harbor-trials)."
    )
    limits: Limits | None = Field(
        default=None,
        description="On docker and podman: the container's process count (nproc) and every "
        "process's open files, file size and CPU time (Harbor sets memory and CPUs from the task).",
    )
    storage_quota: bool = Field(
        default=False,
        description="On docker and podman: cap each container's writable layer at the task's "
        "storage_mb (--storage-opt size: a storage driver with quotas, as lego-rl's daemon on btrfs).",
    )
    tree_limit_mb: int = Field(
        default=2048,
        gt=0,
        description="On docker and podman: the largest working tree copied for pristine "
        "verification (larger at the agent's end: the policy's crossing limit).",
    )
    prestart_verify: bool = Field(
        default=True,
        description="On docker and podman: start the verification's fresh container while the agent "
        "works, so verification does not wait for a container start (both run at once for a while).",
    )
    agent_uid: int | None = Field(
        default=61001,
        ge=1,
        description="On docker and podman: the user id the agent phase's commands run as (made in "
        "the container, owning the working tree), so the agent cannot replace the system's tools "
        "the sandbox's own commands run; null: the image's user.",
    )
    host_address: str = Field(
        default="host.docker.internal",
        description="The host's name as commands inside the environment reach it (proxy URLs), "
        "where the proxy is not relayed (environments other than docker, podman and bubblewrap).",
    )


class HarborSandbox:
    """One started Harbor environment, seen through lego-rl's Sandbox protocol."""

    def __init__(self, environment: BaseEnvironment, loop: LoopThread, workdir: str, options: HarborSandboxOptions):
        self.environment = environment
        self.workdir = workdir
        self._loop = loop
        self._options = options
        self._stopped = False

    def exec(
        self,
        command: str,
        *,
        timeout: float,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        return self._exec(command, timeout=timeout, env=env, cwd=cwd, user=None)

    def _exec(
        self, command: str, *, timeout: float, env: dict[str, str] | None, cwd: str | None, user: str | int | None
    ) -> ExecResult:
        """Run ``command`` as ``user`` (None: the environment's default)."""
        environment = self._started()
        start = time.monotonic()
        call = environment.exec(
            command, cwd=cwd or self.workdir or None, env=env, timeout_sec=math.ceil(timeout), user=user
        )
        try:
            out = self._loop.run(asyncio.wait_for(call, timeout + GRACE_S))
        except (TimeoutError, RuntimeError) as exc:
            seconds = time.monotonic() - start
            if seconds < timeout:
                raise
            stdout, stderr = getattr(exc, "stdout", ""), getattr(exc, "stderr", "") or str(exc)
            return ExecResult(TIMEOUT_EXIT, stdout, stderr, timed_out=True, seconds=seconds)
        return ExecResult(out.return_code, out.stdout or "", out.stderr or "", seconds=time.monotonic() - start)

    def upload(self, src: Path, dst: str) -> None:
        src, target = Path(src), self._inside(dst)
        if not src.exists():
            raise FileNotFoundError(f"upload source {src} does not exist")
        environment = self._started()
        call = environment.upload_dir if src.is_dir() else environment.upload_file
        self._loop.run(call(src, target))

    def download(self, src: str, dst: Path) -> None:
        inside, environment = self._inside(src), self._started()
        is_dir = self._loop.run(environment.is_dir(inside))
        call = environment.download_dir if is_dir else environment.download_file
        self._loop.run(call(inside, Path(dst)))

    def endpoint_url(self, host_url: str) -> str:
        own = getattr(self.environment, "endpoint_url", None)
        if callable(own):
            return str(own(host_url))
        url = urllib.parse.urlsplit(host_url)
        if url.hostname not in LOOPBACK:
            return host_url
        netloc = self._options.host_address + (f":{url.port}" if url.port else "")
        return urllib.parse.urlunsplit(url._replace(netloc=netloc))

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._loop.run(self.environment.stop(delete=self._options.environment.delete))

    def _started(self) -> BaseEnvironment:
        """The environment, to run something in (raises once the sandbox was stopped)."""
        if self._stopped:
            raise HarborSandboxError(f"environment {self.environment.session_id} was stopped")
        return self.environment

    def _inside(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.workdir, path))


class LocalHarborSandbox(HarborSandbox):
    """A sandbox on the bubblewrap environment: it also offers the local sandbox's phase and
    audit surface, which the test-script verifier and the anti-cheat policies use."""

    environment: BwrapEnvironment

    def begin_agent(self) -> None:
        self.environment.sandbox.begin_agent()

    def begin_verify(self, task: Task) -> dict[str, Any]:
        return self.environment.sandbox.begin_verify(task)

    def exec_reporting(
        self, command: str, *, timeout: float, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> tuple[ExecResult, str]:
        return self.environment.sandbox.exec_reporting(command, timeout=timeout, env=env, cwd=cwd or self.workdir)

    def provide(self, paths: Sequence[Path]) -> None:
        self.environment.sandbox.provide(paths)

    def resources_exhausted(self) -> list[dict[str, str]]:
        return self.environment.sandbox.resources_exhausted()

    def kill_all(self) -> int:
        return self.environment.sandbox.kill_all()

    def processes(self, settle: float = 2.0) -> list[int]:
        return self.environment.sandbox.processes(settle)

    def writable_roots(self) -> list[str]:
        return self.environment.sandbox.writable_roots()

    def changes(self) -> list[Change]:
        return self.environment.sandbox.changes()
