"""The host end of a trial's way to the proxy: a unix socket per trial, relayed to one TCP
address on the host (the proxy lego-rl runs on 127.0.0.1).

The socket is bind-mounted into the trial's agent-phase containers at
``/run/legorl/proxy.sock`` (a root-only dir: only the container's init opens it, relaying the
container's ``127.0.0.1:PORT``; see :mod:`legorl_docker.inside`). Nothing else of the host is
reachable from a container: it has no network at all.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

from legorl_std.sandbox.netforward import serve


class SocketRelay:
    """Listens on ``path``; each connection goes to ``upstream()`` (closed while that is None)."""

    def __init__(self, path: Path, upstream: Callable[[], tuple[str, int] | None]):
        self.path = path
        self.upstream = upstream
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        os.chmod(path, 0o600)
        self._listener.listen(64)
        threading.Thread(target=serve, args=(self._listener, self._connect), daemon=True, name="legorl-docker-relay").start()

    def _connect(self) -> socket.socket:
        address = self.upstream()
        if address is None:
            raise OSError("no proxy to relay to yet")
        upstream = socket.create_connection(address, timeout=30)
        upstream.settimeout(None)  # a generation may be silent for minutes
        return upstream

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self.path.unlink(missing_ok=True)
