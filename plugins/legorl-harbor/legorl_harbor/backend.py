"""The ``harbor`` sandbox backend: one Harbor environment per trial (see
:mod:`legorl_harbor.sandbox`), a container one (:mod:`legorl_harbor.container`) on docker and
podman."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from harbor.environments.base import BaseEnvironment
from harbor.environments.factory import EnvironmentFactory
from harbor.models.environment_type import EnvironmentType
from harbor.models.task.config import EnvironmentConfig as TaskEnvironmentConfig
from harbor.models.trial.config import ServiceVolumeConfig
from harbor.models.trial.paths import TrialPaths
from legorl_std.sandbox.dockerfile import own_paths

from lego_rl import hookimpl
from lego_rl.kinds import Problem, Task
from lego_rl.registry import BuildContext
from legorl_harbor.bwrap import BwrapEnvironment
from legorl_harbor.container import ContainerHarborSandbox, compose_overlay
from legorl_harbor.loop import LoopThread
from legorl_harbor.sandbox import HarborSandbox, HarborSandboxError, HarborSandboxOptions, LocalHarborSandbox

CONTAINER_ENGINES = frozenset({EnvironmentType.DOCKER, EnvironmentType.PODMAN})
"""Harbor's environments on this host's container engine: no network, mounts, a relayed proxy."""


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
        config = self.options.environment
        if config.import_path is None and config.type in CONTAINER_ENGINES:
            dockerfile = task.path / "environment" / "Dockerfile"
            declared = TaskEnvironmentConfig.model_validate(task.config.get("environment", {}))
            return ContainerHarborSandbox(
                lambda mounts, phase: self._open(task, f"{trial_id}-{phase}" if phase else trial_id, paths, mounts),
                self._loop,
                self.options,
                paths.trial_dir,
                own_paths(dockerfile.read_text()) if dockerfile.is_file() else (),
                task=task.name,
                caps={
                    "memory_mb": config.override_memory_mb or declared.memory_mb,
                    "storage_mb": config.override_storage_mb or declared.storage_mb,
                },
            )
        environment, workdir = self._open(task, trial_id, paths, None)
        kind = LocalHarborSandbox if isinstance(environment, BwrapEnvironment) else HarborSandbox
        return kind(environment, self._loop, workdir, self.options)

    def _open(
        self, task: Task, trial_id: str, paths: TrialPaths, mounts: list[ServiceVolumeConfig] | None
    ) -> tuple[BaseEnvironment, str]:
        """Create and start the trial's environment; on a container engine (``mounts`` given)
        with these extra mounts and no network. The environment and its working directory."""
        config = self.options.environment
        task_environment = TaskEnvironmentConfig.model_validate(task.config.get("environment", {}))
        storage = (config.override_storage_mb or task_environment.storage_mb) if self.options.storage_quota else None
        if mounts is not None:
            config = config.model_copy(
                update={
                    "extra_docker_compose": [
                        *config.extra_docker_compose,
                        compose_overlay(paths.trial_dir / "compose-overlay.json", self.options.limits, storage),
                    ]
                }
            )
        every = [*(config.mounts or []), *(mounts or [])]
        extra: dict[str, Any] = {"mounts": every} if every else {}  # as Harbor's Trial hands them over
        environment = EnvironmentFactory.create_environment_from_config(
            config,
            environment_dir=task.path / "environment",
            environment_name=task.name,
            session_id=trial_id,
            trial_paths=paths,
            task_env_config=task_environment,
            **extra,
        )
        try:
            self._loop.run(environment.start(force_build=config.force_build))
            where = self._loop.run(environment.exec("pwd", timeout_sec=60))
            workdir = (where.stdout or "").strip().splitlines()[-1:] if where.return_code == 0 else []
            if not workdir or not workdir[0].startswith("/"):
                raise HarborSandboxError(f"cannot find the working directory of {trial_id}: {where}")
        except BaseException:
            self._loop.run(environment.stop(delete=config.delete))
            raise
        return environment, workdir[0]


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
            "a bridge (scripts/dockerd.sh start; export DOCKER_HOST=$(scripts/dockerd.sh host) "
            "DOCKER_BUILDKIT=0); the sandbox gives its containers no network"
        )
    return "see sandbox.options.environment (Harbor's environment config)"
