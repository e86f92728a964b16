"""A Docker daemon and the offline base image for this plugin's tests, once per session.

The daemon is lego-rl's own (``legorl_docker.daemon``: no bridge, no NAT, its own socket and
data root), started when none answers and stopped when the last test session that needed it
ends; ``$LEGORL_DOCKER_HOST`` names another daemon to use instead. The base image is built from
Debian's packages once per machine (cached by its inputs; minutes the first time) and then only
checked. Each test sees the daemon as ``$LEGORL_DOCKER_HOST`` (the plugin's default), set for
this directory's tests only, so no other test picks the docker sandbox up.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from legorl_docker import base, daemon
from legorl_docker.cli import Docker
from legorl_docker.options import HOST_ENV

GIVEN = os.environ.get(HOST_ENV)


@pytest.fixture(scope="session")
def docker_host() -> Iterator[str]:
    if GIVEN:
        yield GIVEN
        return
    if os.geteuid() != 0:
        pytest.skip(f"the docker sandbox's tests start lego-rl's daemon as root (or set ${HOST_ENV})")
    if shutil.which("dockerd") is None:
        pytest.skip("no Docker engine: scripts/setup.sh installs docker.io (as root)")
    with daemon.session() as host:
        yield host


@pytest.fixture(scope="session")
def base_image(docker_host: str) -> base.Built:
    return base.ensure(Docker(docker_host))


@pytest.fixture(autouse=True)
def _daemon_for_this_test(docker_host: str, base_image: base.Built, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOST_ENV, docker_host)
