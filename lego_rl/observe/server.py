"""The dashboard's web server: a static page and read-only JSON endpoints over run stores.

It only ever opens stores read-only and answers GET, so it cannot change a run. It binds to
127.0.0.1 unless told otherwise; on any other interface it requires an access token, given
as ``?token=`` once (it then sets a cookie) or as ``Authorization: Bearer``.
"""

from __future__ import annotations

import hmac
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from lego_rl.observe.reader import RunReader, find_runs
from lego_rl.observe.view import RunView

STATIC = Path(__file__).with_name("static")
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
COOKIE = "legorl_token"


class Runs:
    """The runs being served: directories given, rescanned so new runs in a runs/ dir appear."""

    def __init__(self, paths: list[Path]):
        self.paths = [Path(p) for p in paths]
        self.views: dict[str, RunView] = {}
        self._ids: dict[Path, str] = {}
        self._lock = threading.Lock()

    def scan(self) -> dict[str, RunView]:
        with self._lock:
            for run_dir in find_runs(self.paths):
                if run_dir not in self._ids:
                    run_id, n = run_dir.name, 1
                    while run_id in self.views:
                        n += 1
                        run_id = f"{run_dir.name}-{n}"
                    self._ids[run_dir] = run_id
                    self.views[run_id] = RunView(RunReader(run_dir))
            return dict(self.views)

    def listing(self) -> list[dict[str, Any]]:
        out = []
        for run_id, view in self.scan().items():
            try:
                out.append({"id": run_id, **view.reader.info(), "version": view.reader.version()})
            except (sqlite3.Error, ValueError) as exc:  # a store being created, or damaged
                out.append({"id": run_id, "run_dir": str(view.reader.run_dir), "error": str(exc)})
        for item in out:
            item.pop("spec", None)
        return out


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve a non-local interface without a token."""
    if host not in LOCAL_HOSTS and not token:
        raise ValueError(
            f"serving on {host} exposes the run to the network: give an access token "
            "(--token SECRET, or observe options.token) or bind to 127.0.0.1"
        )


class TokenGate(BaseHTTPMiddleware):
    """401 unless the request carries the token (query, cookie or bearer header)."""

    def __init__(self, app: Any, token: str):
        super().__init__(app)
        self.token = token

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        header = request.headers.get("authorization", "")
        given = (
            request.query_params.get("token")
            or request.cookies.get(COOKIE)
            or (header[7:] if header.lower().startswith("bearer ") else "")
        )
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return JSONResponse({"error": "access token required"}, status_code=401)
        response = await call_next(request)
        if request.query_params.get("token"):
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
        return response


def create_app(paths: list[Path], token: str | None = None) -> Starlette:
    runs = Runs(paths)

    def view_of(request: Request) -> RunView:
        view = runs.scan().get(request.path_params["run"])
        if view is None:
            raise LookupError(f"no run {request.path_params['run']!r}")
        return view

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def list_runs(request: Request) -> Response:
        return JSONResponse(runs.listing())

    async def run_data(request: Request) -> Response:
        try:
            view = view_of(request)
        except LookupError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        since = request.query_params.get("since")
        if since is not None and since.isdigit() and int(since) == view.reader.version():
            return JSONResponse({"unchanged": True, "version": int(since)})
        return JSONResponse(view.data())

    async def trial(request: Request) -> Response:
        try:
            detail = view_of(request).trial(request.path_params["trial"])
        except LookupError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        if detail is None:
            return JSONResponse({"error": "no such trial"}, status_code=404)
        return JSONResponse(detail)

    routes = [
        Route("/", index),
        Route("/api/runs", list_runs),
        Route("/api/runs/{run}", run_data),
        Route("/api/runs/{run}/trials/{trial}", trial),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    middleware = [Middleware(TokenGate, token=token)] if token else []
    return Starlette(routes=routes, middleware=middleware)


class DashboardServer:
    """Serves the dashboard from a background thread (used by ``legorl apply``)."""

    def __init__(
        self, paths: list[Path], host: str = "127.0.0.1", port: int = 8765, token: str | None = None
    ):
        check_bind(host, token)
        self.paths, self.host, self.port, self.token = paths, host, port, token
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Start serving; returns the URL (the port is a free one when the asked one is taken)."""
        import socket

        import uvicorn

        from lego_rl.proxy.threaded import QUIET

        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.bind((self.host, 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(create_app(self.paths, self.token), lifespan="off", **QUIET)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name="legorl-dashboard",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not self._server.started:
            raise RuntimeError(f"the dashboard server did not start on {self.host}:{self.port}")
        return self.url

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        query = f"?token={self.token}" if self.token else ""
        return f"http://{host}:{self.port}/{query}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None
