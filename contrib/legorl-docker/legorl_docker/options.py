"""The docker sandbox's options (the spec's ``sandbox.options``)."""

from __future__ import annotations

import os

from legorl_std.sandbox.limits import Limits
from pydantic import BaseModel, ConfigDict, Field

HOST_ENV = "LEGORL_DOCKER_HOST"


class DockerOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str | None = Field(
        default=None,
        description=f"The Docker daemon (a DOCKER_HOST URL). Default: ${HOST_ENV}, else $DOCKER_HOST, else the "
        "docker CLI's default. lego-rl's own daemon (scripts/dockerd.sh start): unix:///run/legorl-docker/docker.sock.",
    )
    docker: str = Field(default="docker", description="The docker CLI.")
    fallback_base: str | None = Field(
        default="legorl/base:bookworm",
        description="The local image a task's FROM is built on when the daemon lacks the named one (no registry "
        "is reachable); null: such a task fails to start. Build it: python -m legorl_docker.base.",
    )
    base_images: dict[str, str] = Field(
        default_factory=dict, description="FROM image -> the local image to build on instead (before fallback_base)."
    )
    root: str | None = Field(
        default=None, description="Directory of per-trial records (default: <run dir>/trials, or a temp dir)."
    )
    keep: bool = Field(default=True, description="Keep each trial's record (sandbox.json, /logs of both phases).")
    storage_mb: int | None = Field(
        default=None,
        gt=0,
        description="A container's writable storage (default: the task's [environment] storage_mb, else 2048); "
        "enforced where the daemon's storage driver can (btrfs, overlay2 on XFS with pquota).",
    )
    limits: Limits = Field(
        default_factory=Limits,
        description="Resource limits: per command (cpu_seconds, address_space_mb, file_size_mb, open_files as "
        "rlimits) and per container (nproc: the container's process count).",
    )
    relay_port: int = Field(
        default=18080, ge=1, le=65535, description="The loopback port inside where the proxy is relayed."
    )
    uid: int = Field(default=61001, ge=1, description="The trial user inside (every command runs as it).")
    gid: int = Field(default=61000, ge=1, description="The trial user's group.")
    build_timeout: float = Field(default=1800.0, gt=0, description="Seconds an image build may take.")

    def daemon(self) -> str | None:
        return self.host or os.environ.get(HOST_ENV) or None
