"""Sandbox ``harbor``: one trial in any Harbor environment, driven through Harbor's Python API.

``environment`` is Harbor's own trial environment config: ``type`` (docker, kubernetes, modal,
daytona, e2b, ...) or ``import_path``, its ``kwargs`` and resource overrides. The default is
:class:`legorl_harbor.bwrap.BwrapEnvironment`, which needs no Docker. Harbor's API is async;
each backend drives it from one private event-loop thread.

The working directory is what the environment reports for ``pwd`` at start (the image's
WORKDIR). A command past its timeout is reported as timed out (exit 124) whether the
environment raised or returned. The proxy is reached at ``host_address`` (the host as the
environment sees it) unless the environment maps URLs itself (``endpoint_url``, as the
bubblewrap one does).
"""

from __future__ import annotations

import asyncio
import math
import posixpath
import tempfile
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harbor.environments.base import BaseEnvironment
from harbor.environments.factory import EnvironmentFactory
from harbor.models.task.config import EnvironmentConfig as TaskEnvironmentConfig
from harbor.models.trial.config import EnvironmentConfig
from harbor.models.trial.paths import TrialPaths
from legorl_std.sandbox.snapshot import Change
from pydantic import BaseModel, ConfigDict, Field

from lego_rl import hookimpl
from lego_rl.kinds import ExecResult, Problem, Task
from lego_rl.registry import BuildContext
from legorl_harbor.bwrap import BwrapEnvironment
from legorl_harbor.loop import LoopThread

BWRAP = "legorl_harbor.bwrap:BwrapEnvironment"
TIMEOUT_EXIT = 124
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
    host_address: str = Field(
        default="host.docker.internal",
        description="The host's name as commands inside the environment reach it (proxy URLs).",
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
        if self._stopped:
            raise HarborSandboxError(f"environment {self.environment.session_id} was stopped")
        start = time.monotonic()
        call = self.environment.exec(command, cwd=cwd or self.workdir or None, env=env, timeout_sec=math.ceil(timeout))
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
        call = self.environment.upload_dir if src.is_dir() else self.environment.upload_file
        self._loop.run(call(src, target))

    def download(self, src: str, dst: Path) -> None:
        inside = self._inside(src)
        is_dir = self._loop.run(self.environment.is_dir(inside))
        call = self.environment.download_dir if is_dir else self.environment.download_file
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


class HarborSandboxBackend:
    """Starts one Harbor environment per trial; construction touches nothing."""

    def __init__(self, options: HarborSandboxOptions, ctx: BuildContext):
        self.options = options
        root = ctx.path(options.root) if options.root else None
        if root is None and ctx.run_dir is not None:
            root = ctx.run_dir / "harbor-trials"
        self._root = root
        self._loop = LoopThread()

    def preflight(self) -> list[Problem]:
        config = self.options.environment
        try:
            EnvironmentFactory.get_environment_class(config.type, config.import_path)
            EnvironmentFactory.run_preflight(config.type, config.import_path, config.kwargs)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - any provider failure is a finding
            what = config.import_path or (config.type.value if config.type else "?")
            return [Problem(f"Harbor environment {what} is not usable here: {exc}", _fix(what))]
        return []

    def start(self, task: Task, trial_id: str) -> HarborSandbox:
        root = self._root or Path(tempfile.mkdtemp(prefix="legorl-harbor-"))
        paths = TrialPaths(trial_dir=(root / trial_id).absolute())
        paths.mkdir()
        environment = EnvironmentFactory.create_environment_from_config(
            self.options.environment,
            environment_dir=task.path / "environment",
            environment_name=task.name,
            session_id=trial_id,
            trial_paths=paths,
            task_env_config=TaskEnvironmentConfig.model_validate(task.config.get("environment", {})),
        )
        self._loop.run(environment.start(force_build=self.options.environment.force_build))
        kind = LocalHarborSandbox if isinstance(environment, BwrapEnvironment) else HarborSandbox
        sandbox = kind(environment, self._loop, "", self.options)
        try:
            where = sandbox.exec("pwd", timeout=60)
            if where.exit_code != 0 or not where.stdout.strip().startswith("/"):
                raise HarborSandboxError(f"cannot find the working directory of {trial_id}: {where}")
        except BaseException:
            sandbox.stop()
            raise
        sandbox.workdir = where.stdout.strip().splitlines()[-1]
        return sandbox


def build(options: HarborSandboxOptions, ctx: BuildContext) -> HarborSandboxBackend:
    """Trials on any Harbor environment (docker, kubernetes, modal, ...; default: bubblewrap)."""
    return HarborSandboxBackend(options, ctx)


@hookimpl
def legorl_register_sandbox(register: Any) -> None:
    register("harbor", build, options=HarborSandboxOptions)


def _fix(environment: str) -> str:
    """How to make Harbor's ``environment`` usable: for docker, a daemon its CLI reaches."""
    if environment == "docker":
        return (
            "start a Docker daemon Harbor's docker CLI reaches: the system's, or lego-rl's own without "
            "a bridge (scripts/dockerd.sh start; export DOCKER_HOST=$(scripts/dockerd.sh host)); "
            "containers must run with no network: environment.extra_docker_compose "
            "[contrib/legorl-docker/examples/harbor-no-network.yaml]"
        )
    return "see sandbox.options.environment (Harbor's environment config)"
