"""A trial in one of Harbor's container environments on this host's engine (``type: docker``
or ``podman``), with what lego-rl's trials need that Harbor's config alone does not give:

- **No network.** A Compose overlay (:func:`no_network_overlay`) is added to the environment's
  ``extra_docker_compose``: the service and its build get ``network_mode: none`` (Compose then
  creates no network).
- **The harness's files.** Harbor fixes mounts when a container starts, so the environment is
  started by the first command, upload or download: the paths :meth:`provide` names by then
  (the trial runner names them right after start) are read-only binds at their own paths.
- **The proxy.** A directory of the trial is bound read-only at :data:`RUN`; it holds a unix
  socket whose host end relays to the proxy
  (:class:`~legorl_std.sandbox.netforward.SocketRelay`) and the container's PID 1
  (:data:`~legorl_std.sandbox.netforward.CONTAINER_INIT`, on the image's ``python3``), which
  reaps orphans and relays its loopback port :data:`RELAY_PORT` to that socket. The harness is
  told ``http://127.0.0.1:RELAY_PORT/...``.
- **Kills.** :meth:`kill_all` kills every process but PID 1, as root.
"""

from __future__ import annotations

import json
import shutil
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path

from harbor.environments.base import BaseEnvironment
from harbor.models.trial.config import ServiceVolumeConfig
from legorl_std.sandbox.netforward import CONTAINER_INIT, SocketRelay
from legorl_std.sandbox.reap import KILL_OTHERS

from lego_rl.data import SandboxFailure
from legorl_harbor.loop import LoopThread
from legorl_harbor.sandbox import LOOPBACK, HarborSandbox, HarborSandboxError, HarborSandboxOptions

RUN = "/run/legorl"
RELAY_PORT = 18080
KILL_TIMEOUT_S = 60
Opener = Callable[[list[ServiceVolumeConfig]], tuple[BaseEnvironment, str]]
"""Creates and starts the trial's environment with these extra mounts; it and its workdir."""


def no_network_overlay(path: Path) -> Path:
    """Write the Compose overlay of a trial's container to ``path``: no network for the service
    nor its build (the classic builder, ``DOCKER_BUILDKIT=0``, holds that for every RUN), the
    relaying init as PID 1 (Harbor's ``sh -c "sleep infinity"`` reaps no orphan)."""
    service = {
        "network_mode": "none",
        "build": {"network": "none"},
        "command": ["python3", "-I", "-S", f"{RUN}/init.py", str(RELAY_PORT)],
    }
    path.write_text(json.dumps({"services": {"main": service}}, indent=2))  # JSON is YAML
    return path


def bind(source: Path | str, target: str) -> ServiceVolumeConfig:
    """A read-only bind mount of ``source`` at ``target``."""
    return {"type": "bind", "source": str(source), "target": target, "read_only": True}


class ContainerHarborSandbox(HarborSandbox):
    """A Harbor container environment started at its first use (see the module)."""

    def __init__(self, open_environment: Opener, loop: LoopThread, options: HarborSandboxOptions, trial_dir: Path):
        self._open = open_environment
        self._loop = loop
        self._options = options
        self._stopped = False
        self._lock = threading.Lock()
        self._mounts: list[ServiceVolumeConfig] = []
        self._failed: BaseException | None = None
        self._environment: BaseEnvironment | None = None
        self._workdir = ""
        self._proxy_dir = trial_dir / "run"
        self._proxy_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copyfile(CONTAINER_INIT, self._proxy_dir / "init.py")
        self._upstream: tuple[str, int] | None = None
        self._relay = SocketRelay(self._proxy_dir / "proxy.sock", lambda: self._upstream)

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
        if self._environment is None:
            return 0
        done = self._loop.run(self._environment.exec(KILL_OTHERS, user="root", timeout_sec=KILL_TIMEOUT_S))
        words = (done.stdout or "").split()
        return int(words[-1]) if done.return_code == 0 and words and words[-1].isdigit() else 0

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._relay.close()
        if self._environment is not None:
            self._loop.run(self._environment.stop(delete=self._options.environment.delete))

    def _started(self) -> BaseEnvironment:
        with self._lock:
            if self._stopped:
                raise HarborSandboxError("the trial's environment was stopped")
            if self._failed is not None:
                raise SandboxFailure(f"the trial's environment did not start: {self._failed}")
            if self._environment is None:
                try:
                    self._environment, self._workdir = self._open([*self._mounts, bind(self._proxy_dir, RUN)])
                except Exception as exc:
                    self._failed = exc
                    raise SandboxFailure(f"the trial's environment did not start: {type(exc).__name__}: {exc}") from exc
            return self._environment
