"""An ASGI app served by uvicorn on a daemon thread: the proxy, and test servers built the same way."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn

QUIET: dict[str, Any] = {"log_config": None, "log_level": "warning"}
"""uvicorn logging for servers started in threads: warnings only, and no ``dictConfig`` per
server (a second server's config would reset the levels to INFO while the first one starts)."""


class ThreadedServer:
    """``start()`` returns once the app listens; ``stop()`` ends it (both idempotent)."""

    def __init__(self, app: Any, host: str, port: int, name: str) -> None:
        self.app, self.host, self.port, self.name = app, host, port, name
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self, timeout: float, failure: str) -> int:
        """Serve; the port bound. Raises ``RuntimeError(failure)`` when it does not listen in time."""
        config = uvicorn.Config(self.app, host=self.host, port=self.port, access_log=False, lifespan="off", **QUIET)
        server = self._server = uvicorn.Server(config)
        thread = self._thread = threading.Thread(target=server.run, name=self.name, daemon=True)
        thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self._server = None
                raise RuntimeError(failure)
            time.sleep(0.01)
        return int(server.servers[0].sockets[0].getsockname()[1])

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None
