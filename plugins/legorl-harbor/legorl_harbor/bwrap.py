"""A Harbor environment without Docker: each trial runs in legorl-std's bubblewrap sandbox.

Use it from Harbor as ``environment.import_path = "legorl_harbor.bwrap:BwrapEnvironment"``;
``environment.kwargs.sandbox`` takes the local sandbox's options (``root``, ``uid_base``,
``limits``, ...). The task's ``environment/Dockerfile`` is materialised as the local sandbox
does it (its files, not its image); ``/logs/{agent,verifier,artifacts}`` exist from the start.
Commands run as the sandbox's trial user whatever ``user`` Harbor asks for, on a loopback-only
network (``no-network``; the proxy is relayed through :meth:`BwrapEnvironment.endpoint_url`).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.environments.options import EnvironmentOptions
from legorl_std.sandbox.local import (
    LocalSandbox,
    LocalSandboxBackend,
    LocalSandboxOptions,
    SandboxError,
)
from legorl_std.tasks.harbor_dir import load_task
from pydantic import Field

from lego_rl.kinds import Task
from lego_rl.registry import BuildContext

DEFAULT_TIMEOUT_S = 24 * 3600.0
"""A command's timeout when Harbor gives none."""


_BACKENDS: dict[tuple[Path, str], LocalSandboxBackend] = {}
_BACKENDS_LOCK = threading.Lock()


def _backend(options: LocalSandboxOptions, job_dir: Path) -> LocalSandboxBackend:
    """One local sandbox backend per job dir and options, shared by its trials (they share
    its image cache). The job dir (every trial's logs) is hidden from inside."""
    key = (job_dir.absolute(), options.model_dump_json())
    with _BACKENDS_LOCK:
        if key not in _BACKENDS:
            _BACKENDS[key] = LocalSandboxBackend(options, BuildContext(run_dir=key[0]))
        return _BACKENDS[key]


class BwrapOptions(EnvironmentOptions):
    sandbox: LocalSandboxOptions = Field(
        default_factory=LocalSandboxOptions, description="Options of legorl-std's local sandbox."
    )


class ExecTimeout(RuntimeError):
    """A command ran past its timeout (Harbor's Docker environment raises a RuntimeError too)."""

    def __init__(self, seconds: float, stdout: str, stderr: str) -> None:
        super().__init__(f"Command timed out after {seconds:g} seconds")
        self.stdout, self.stderr = stdout, stderr


class BwrapEnvironment(BaseEnvironment):
    options_model = BwrapOptions
    options: BwrapOptions

    @staticmethod
    def type() -> str:
        return "legorl-bwrap"

    @classmethod
    def preflight(cls, kwargs: dict[str, Any] | None = None) -> None:
        """Options valid and bubblewrap usable here (Harbor calls this before queueing trials)."""
        super().preflight(kwargs)
        options = cls.parse_options(kwargs)
        sandbox = options.sandbox if isinstance(options, BwrapOptions) else LocalSandboxOptions()
        fatal = [str(p) for p in LocalSandboxBackend(sandbox, BuildContext()).preflight() if p.fatal]
        if fatal:
            raise ValueError("; ".join(fatal))

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(disable_internet=True)

    def _validate_definition(self) -> None:
        if not (self.environment_dir / "Dockerfile").is_file():
            raise FileNotFoundError(
                f"{self.environment_dir / 'Dockerfile'} is missing: the bubblewrap environment "
                "materialises a Dockerfile's files (prebuilt images need a container environment)"
            )

    @property
    def sandbox(self) -> LocalSandbox:
        found = getattr(self, "_sandbox", None)
        if found is None:
            raise SandboxError(f"environment {self.session_id} is not started")
        return found

    async def start(self, force_build: bool) -> None:
        backend = _backend(self.options.sandbox, self.trial_paths.trial_dir.parent)
        fatal = [str(p) for p in backend.preflight() if p.fatal]
        if fatal:
            raise SandboxError("; ".join(fatal))
        self._sandbox = await asyncio.to_thread(backend.start, self._task(), self.session_id)

    def _task(self) -> Task:
        """The task on disk, with the resources Harbor resolved (task.toml, then overrides)."""
        task = load_task(self.environment_dir.parent)
        declared = self.task_env_config
        resolved = {
            "storage_mb": self._override_storage_mb or declared.storage_mb,
            "memory_mb": self._override_memory_mb or declared.memory_mb,
            "cpus": self._override_cpus or declared.cpus,
        }
        environment = {**task.config.get("environment", {}), **{k: v for k, v in resolved.items() if v}}
        return task.model_copy(update={"config": {**task.config, "environment": environment}})

    async def stop(self, delete: bool) -> None:
        found = getattr(self, "_sandbox", None)
        if found is not None:
            await asyncio.to_thread(found.stop)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        timeout = float(timeout_sec) if timeout_sec else DEFAULT_TIMEOUT_S
        merged = self._merge_env(env)
        out = await asyncio.to_thread(self.sandbox.exec, command, timeout=timeout, env=merged, cwd=cwd)
        if out.timed_out:
            raise ExecTimeout(timeout, out.stdout, out.stderr)
        return ExecResult(stdout=out.stdout, stderr=out.stderr, return_code=out.exit_code)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        await asyncio.to_thread(self.sandbox.upload, Path(source_path), target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        await asyncio.to_thread(self.sandbox.upload, Path(source_dir), target_dir)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        await asyncio.to_thread(self.sandbox.download, source_path, Path(target_path))

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        await asyncio.to_thread(self.sandbox.download, source_dir, Path(target_dir))

    def endpoint_url(self, host_url: str) -> str:
        """``host_url`` as commands inside reach it (the local sandbox's relay)."""
        return self.sandbox.endpoint_url(host_url)
