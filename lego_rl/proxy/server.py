"""The proxy server: per-session routes for each dialect, served by uvicorn in a thread.

Every session lives under ``/s/<session id>``; its dialect's routes hang below (e.g.
``/s/<id>/v1/chat/completions``), plus ``GET /v1/models``. A request must present the
session's key. Calls run in worker threads so one long generation never blocks the others.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from lego_rl.data import CallRecord, Sampling
from lego_rl.kinds import Dialect, Inference
from lego_rl.proxy import errors
from lego_rl.proxy.errors import ProxyError, openai_error
from lego_rl.proxy.jsonio import FastJSONResponse as JSONResponse
from lego_rl.proxy.pipeline import CallHandler, Reply
from lego_rl.proxy.render import load_template
from lego_rl.proxy.session import ProxySession
from lego_rl.proxy.threaded import ThreadedServer

STARTUP_TIMEOUT_S = 30.0
_heap_frozen = False


def freeze_startup_heap() -> None:
    """Exclude the objects alive now (the imported libraries: hundreds of thousands in a process
    with transformers) from every later garbage collection, once per process.

    A full collection walks every tracked object and stalls all calls in flight for as long
    (about 0.2-0.5 s with transformers imported); frozen objects are still freed by reference
    counting, only garbage cycles alive at this moment would be kept (a collection runs first)."""
    global _heap_frozen
    if not _heap_frozen:
        _heap_frozen = True
        gc.collect()
        gc.freeze()


class ProxyServer:
    """Serves model APIs to harnesses and records every call, session by session."""

    def __init__(
        self,
        inference: Inference,
        dialects: Mapping[str, Dialect],
        *,
        model_name: str,
        host: str = "127.0.0.1",
        port: int = 0,
        max_context: int = 8192,
        chat_template: str = "qwen3",
        on_call: Callable[[CallRecord], None] | None = None,
        max_workers: int = 256,
        max_body_bytes: int = 32 * 1024 * 1024,
        freeze_heap: bool = True,
    ):
        self.dialects = dict(dialects)
        self.freeze_heap = freeze_heap
        self.model_name = model_name
        self.host, self.port = host, port
        self.max_workers = max_workers
        self.max_body_bytes = max_body_bytes
        self.handler = CallHandler(
            inference, model_name, max_context, load_template(chat_template), on_call
        )
        self.sessions: dict[str, ProxySession] = {}
        self.url = ""
        self.app = Starlette(
            routes=[
                Route("/", _ok, methods=["GET", "HEAD"]),
                Route("/s/{sid}", self._dispatch, methods=["GET", "HEAD", "POST"]),
                Route(
                    "/s/{sid}/{rest:path}",
                    self._dispatch,
                    methods=["GET", "HEAD", "POST"],
                ),
            ]
        )
        self._serving: ThreadedServer | None = None
        self._executor: ThreadPoolExecutor | None = None

    # -------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Listen in a background thread; returns once the socket accepts connections."""
        if self._serving is not None:
            raise RuntimeError(f"proxy already started at {self.url}")
        if self.freeze_heap:
            freeze_startup_heap()
        self._executor = ThreadPoolExecutor(
            self.max_workers, thread_name_prefix="legorl-proxy-call"
        )
        serving = ThreadedServer(self.app, self.host, self.port, "legorl-proxy")
        port = serving.start(
            STARTUP_TIMEOUT_S,
            f"proxy could not listen on {self.host}:{self.port} (port in use? use port 0 for a free one)",
        )
        self._serving = serving
        self.url = f"http://{self.host}:{port}"

    def stop(self) -> None:
        if self._serving is not None:
            self._serving.stop()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        self._serving = self._executor = None

    # -------------------------------------------------------------- sessions

    def open_session(
        self,
        session_id: str,
        dialect: str,
        *,
        sampling: Sampling,
        max_calls: int | None = None,
        small_model: str = "",
    ) -> ProxySession:
        if dialect not in self.dialects:
            known = ", ".join(sorted(self.dialects)) or "none"
            raise ValueError(f"proxy has no dialect {dialect!r} (loaded: {known})")
        if session_id in self.sessions:
            raise ValueError(f"proxy session {session_id!r} is already open")
        session = ProxySession(session_id, dialect, sampling, max_calls, small_model=small_model)
        self.sessions[session_id] = session
        return session

    def close_session(self, session_id: str) -> ProxySession:
        """Stop serving a session (later requests get 404) and hand back its records."""
        try:
            session = self.sessions.pop(session_id)
        except KeyError:
            raise KeyError(f"proxy session {session_id!r} is not open") from None
        session.closed = True
        return session

    # -------------------------------------------------------------- requests

    async def _dispatch(self, request: Request) -> Response:
        sid = request.path_params["sid"]
        path = "/" + request.path_params.get("rest", "").strip("/")
        session = self.sessions.get(sid)
        if session is None:
            message = f"unknown proxy session {sid!r} (closed, or never opened)"
            return JSONResponse(openai_error(404, message, errors.NOT_FOUND), 404)
        dialect = self.dialects[session.dialect]
        if path == "/" and request.method in ("GET", "HEAD"):
            return JSONResponse({})
        if not session.authorized(request.headers):
            return _error(
                dialect,
                401,
                "invalid or missing API key for this session",
                errors.INVALID_API_KEY,
            )
        if request.method == "GET" and path == "/v1/models":
            return JSONResponse(self._models())
        route = (request.method, path)
        counting = route == _route(*getattr(dialect, "count_tokens_route", ("", "")))
        if not counting and route not in {_route(m, p) for m, p in dialect.routes}:
            message = f"no route {request.method} {path} in dialect {dialect.name!r}"
            return _error(dialect, 404, message, errors.NOT_FOUND)
        body = await self._body(request, session, dialect)
        if isinstance(body, Response):
            return body
        loop = asyncio.get_running_loop()
        if counting:
            return await self._count(loop, session, dialect, body)
        replies: asyncio.Queue[Reply] = asyncio.Queue()

        def reply(item: Reply) -> None:
            loop.call_soon_threadsafe(replies.put_nowait, item)

        loop.run_in_executor(self._executor, self._serve, session, dialect, body, reply)
        first = await replies.get()
        if first[0] == "json":
            return JSONResponse(first[2], first[1])

        async def events() -> AsyncIterator[str]:
            while (item := await replies.get())[0] == "data":
                yield item[1]

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    def _serve(self, session: ProxySession, dialect: Dialect, body: bytes, reply: Any) -> None:
        """The worker side of one call: whatever goes wrong, the client gets an answer."""
        started = False

        def tracked(item: Reply) -> None:
            nonlocal started
            started = started or item[0] == "start"
            reply(item)

        try:
            self.handler.serve(session, dialect, body, tracked)
        except Exception as exc:  # noqa: BLE001 - answer 500, keep the reason with the session
            message = f"proxy failure: {type(exc).__name__}: {exc}"
            session.errors.append(message)
            if started:
                reply(("end",))
            else:
                reply(("json", 500, dialect.error(500, message, errors.SERVER_ERROR)))

    async def _body(
        self, request: Request, session: ProxySession, dialect: Dialect
    ) -> bytes | Response:
        """The request's body, or the 413 in the dialect's shape. (The worker reads it: a
        malformed one is a 400 from there.)"""
        declared = request.headers.get("content-length", "")
        size = int(declared) if declared.isdigit() else 0
        raw = b"" if size > self.max_body_bytes else await request.body()
        if max(size, len(raw)) <= self.max_body_bytes:
            return raw
        message = (
            f"request body of {max(size, len(raw))} bytes is over the proxy's limit of "
            f"{self.max_body_bytes} bytes (ProxyServer max_body_bytes)"
        )
        session.rejected.append(f"413 {errors.TOO_LARGE}: {message}")
        return _error(dialect, 413, message, errors.TOO_LARGE)

    async def _count(
        self,
        loop: asyncio.AbstractEventLoop,
        session: ProxySession,
        dialect: Dialect,
        body: bytes,
    ) -> Response:
        try:
            n = await loop.run_in_executor(
                self._executor, self.handler.count_tokens, session, dialect, body
            )
        except ProxyError as exc:
            session.rejected.append(f"{exc.status} {exc.kind}: {exc.message}")
            return _error(dialect, exc.status, exc.message, exc.kind)
        return JSONResponse({"input_tokens": n})

    def _models(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {
                    "id": self.model_name,
                    "object": "model",
                    "created": 0,
                    "owned_by": "lego-rl",
                }
            ],
        }


def _route(method: str, path: str) -> tuple[str, str]:
    return method.upper(), "/" + path.strip("/")


def _error(dialect: Dialect, status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse(dialect.error(status, message, kind), status)


async def _ok(request: Request) -> Response:
    return JSONResponse({"status": "ok"})
