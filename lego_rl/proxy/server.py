"""The proxy server: per-session routes for each dialect, served by uvicorn in a thread.

Every session lives under ``/s/<session id>``; its dialect's routes hang below (e.g.
``/s/<id>/v1/chat/completions``), plus ``GET /v1/models``. A request must present the
session's key; a wrong key and an unknown session get the same answer. Bodies are read on the
event loop under the limits of :mod:`lego_rl.proxy.limits`; calls run in worker threads so one
long generation never blocks the others. Every error is JSON in the shape of the path's API.
A client that goes away while its call generates (streamed or not) aborts the generation: the
call's place in flight and the backend's slot are freed, and the call is recorded as cut.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive

from lego_rl.data import CallRecord, Sampling
from lego_rl.kinds import Dialect, Inference
from lego_rl.proxy import errors
from lego_rl.proxy.budgets import forget_scope
from lego_rl.proxy.errors import ErrorShape, ProxyError
from lego_rl.proxy.jsonio import FastJSONResponse as JSONResponse
from lego_rl.proxy.limits import InFlight, Ticket, read_body
from lego_rl.proxy.pipeline import CallHandler, Reply
from lego_rl.proxy.render import load_template
from lego_rl.proxy.routes import Routes, normalized
from lego_rl.proxy.session import ProxySession, new_api_key, presents
from lego_rl.proxy.threaded import ThreadedServer

STARTUP_TIMEOUT_S = 30.0
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
NO_SESSION = (
    "no open proxy session at this path accepts the request's API key (Authorization: Bearer "
    "or x-api-key): a wrong key, or a session closed or never opened"
)
"""The one answer to a wrong key and to an unknown session: neither tells the session exists."""
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
        max_in_flight: int | None = None,
        max_in_flight_per_session: int = 16,
        freeze_heap: bool = True,
    ):
        """``max_in_flight`` (default ``max_workers``, so no call waits for a thread) and
        ``max_in_flight_per_session`` cap the requests being read, generated or counted; one
        over a cap is answered 429."""
        self.dialects = dict(dialects)
        self.freeze_heap = freeze_heap
        self.model_name = model_name
        self.host, self.port = host, port
        self.max_workers = max_workers
        self.max_body_bytes = max_body_bytes
        self.in_flight = InFlight(max_in_flight_per_session, max_in_flight or max_workers)
        self.handler = CallHandler(
            inference, model_name, max_context, load_template(chat_template), on_call
        )
        self.sessions: dict[str, ProxySession] = {}
        self.routes = Routes(self.dialects)
        self._decoy_key = new_api_key()
        self.url = ""
        self.app = Starlette(
            routes=[
                Route("/", _ok, methods=["GET", "HEAD"]),
                Route("/s/{sid}", self._dispatch, methods=ALL_METHODS),
                Route("/s/{sid}/{rest:path}", self._dispatch, methods=ALL_METHODS),
            ],
            exception_handlers={HTTPException: self._unrouted},
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
        """Stop serving a session (later requests are answered as a wrong key's) and hand back
        its records; what it kept for a next call and its entries in every cache are freed."""
        try:
            session = self.sessions.pop(session_id)
        except KeyError:
            raise KeyError(f"proxy session {session_id!r} is not open") from None
        session.closed = True
        with session.lock:
            session.release()
        forget_scope(session_id)
        return session

    # -------------------------------------------------------------- requests

    async def _dispatch(self, request: Request) -> Response:
        path = _api_path(request)
        if path == "/" and request.method in ("GET", "HEAD"):
            return JSONResponse({})  # a probe of a base URL: the same answer for every id
        session = self._session(request.path_params["sid"], request.headers)
        if session is None:
            return _error(self.routes.shape(path), 401, NO_SESSION, errors.INVALID_API_KEY)
        dialect = self.dialects[session.dialect]
        served = self.routes.at(session.dialect, path)
        use = served.get(request.method)
        if use is None:
            return _unserved(dialect, request.method, path, served)
        if use == "models":
            return JSONResponse(self._models())
        try:
            ticket = self.in_flight.admit(session.id)
            try:
                body = await read_body(request, self.max_body_bytes)
                if use == "count":
                    return await self._count(session, dialect, body)
                return await self._call(session, dialect, body, ticket, request.receive)
            finally:
                ticket.release()
        except ProxyError as exc:
            session.reject(exc)
            retry = {"retry-after": "1"} if exc.status == 429 else None
            return _error(dialect.error, exc.status, exc.message, exc.kind, retry)

    def _session(self, sid: str, headers: Mapping[str, str]) -> ProxySession | None:
        """The session ``sid`` when the request presents its key; None for a wrong key and for
        an unknown session alike, found by the same work (one constant-time comparison)."""
        session = self.sessions.get(sid)
        key = self._decoy_key if session is None else session.api_key
        return session if presents(headers, key) and session is not None else None

    async def _call(
        self,
        session: ProxySession,
        dialect: Dialect,
        body: bytes,
        ticket: Ticket,
        receive: Receive,
    ) -> Response:
        """Generate on a worker thread; the ticket is held until the worker is done. Until the
        reply is sent whole, a client's disconnect sets the call's abort event."""
        loop = asyncio.get_running_loop()
        replies: asyncio.Queue[Reply] = asyncio.Queue()
        abort = threading.Event()

        def reply(item: Reply) -> None:
            loop.call_soon_threadsafe(replies.put_nowait, item)

        watch = asyncio.ensure_future(_watch_disconnect(receive, abort))
        serve = self._serve
        work = loop.run_in_executor(self._executor, serve, session, dialect, body, reply, abort)
        ticket.hold()
        work.add_done_callback(lambda _: ticket.release())
        try:
            first = await replies.get()
        except BaseException:  # the server's own end (cancelled): the reply is never sent
            abort.set()
            watch.cancel()
            raise
        if first[0] == "json":
            watch.cancel()
            return JSONResponse(first[2], first[1])

        async def events() -> AsyncIterator[str]:
            ended = False
            try:
                while (item := await replies.get())[0] == "data":
                    yield item[1]
                ended = True
            finally:  # closed early: the client went away mid-stream
                watch.cancel()
                if not ended:
                    abort.set()

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    def _serve(
        self,
        session: ProxySession,
        dialect: Dialect,
        body: bytes,
        reply: Any,
        abort: threading.Event | None = None,
    ) -> None:
        """The worker side of one call: whatever goes wrong, the client gets an answer."""
        started = False

        def tracked(item: Reply) -> None:
            nonlocal started
            started = started or item[0] == "start"
            reply(item)

        try:
            self.handler.serve(session, dialect, body, tracked, abort)
        except Exception as exc:  # noqa: BLE001 - answer 500, keep the reason with the session
            message = f"proxy failure: {type(exc).__name__}: {exc}"
            session.errors.append(message)
            if started:
                reply(("end",))
            else:
                reply(("json", 500, dialect.error(500, message, errors.SERVER_ERROR)))

    async def _count(self, session: ProxySession, dialect: Dialect, body: bytes) -> Response:
        """Count on a worker thread (raises ProxyError: 400 for a malformed body, 500 in the
        dialect's shape for anything else that goes wrong)."""
        loop = asyncio.get_running_loop()
        count = self.handler.count_tokens
        try:
            n = await loop.run_in_executor(self._executor, count, session, dialect, body)
        except ProxyError:
            raise
        except Exception as exc:  # noqa: BLE001 - answer 500 as JSON, keep the reason
            message = f"proxy failure counting tokens: {type(exc).__name__}: {exc}"
            session.errors.append(message)
            raise ProxyError(500, message, errors.SERVER_ERROR) from exc
        return JSONResponse({"input_tokens": n})

    async def _unrouted(self, request: Request, exc: Exception) -> Response:
        """Starlette's own 404 and 405 (paths outside ``/s/<id>``), as JSON errors."""
        assert isinstance(exc, HTTPException)
        kind = errors.METHOD_NOT_ALLOWED if exc.status_code == 405 else errors.NOT_FOUND
        message = (
            f"{request.method} {request.url.path}: {exc.detail} (model APIs are served below "
            "/s/<session id>/, the base URL of a session)"
        )
        shape = self.routes.shape(_api_path(request))
        return _error(shape, exc.status_code, message, kind, exc.headers)

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


async def _watch_disconnect(receive: Receive, abort: threading.Event) -> None:
    """Set ``abort`` when the client disconnects (the body has been read: the next message the
    server has for this request is its disconnect). Cancelled once the reply is sent whole."""
    while (await receive())["type"] != "http.disconnect":
        pass
    abort.set()


def _api_path(request: Request) -> str:
    """The path of the API called: below the session's base URL, or the whole path outside."""
    params = request.path_params
    return normalized(params.get("rest", "") if "sid" in params else request.url.path)


def _unserved(dialect: Dialect, method: str, path: str, served: Mapping[str, Any]) -> Response:
    """404 for a path the session's dialect does not serve, 405 for a method it does not."""
    if not served:
        message = f"no route {method} {path} in dialect {dialect.name!r}"
        return _error(dialect.error, 404, message, errors.NOT_FOUND)
    allowed = ", ".join(sorted(served))
    message = f"{method} {path} is not served in dialect {dialect.name!r}; use {allowed}"
    return _error(dialect.error, 405, message, errors.METHOD_NOT_ALLOWED, {"allow": allowed})


def _error(
    shape: ErrorShape,
    status: int,
    message: str,
    kind: str,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(shape(status, message, kind), status, headers=dict(headers or {}))


async def _ok(request: Request) -> Response:
    return JSONResponse({"status": "ok"})
