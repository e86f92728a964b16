"""What one client may take of the proxy: bytes of request body, requests in flight.

Both are enforced on the event loop without waiting: a body is read as it streams in and
refused (413) the moment it passes the cap; a request over an in-flight cap is refused (429)
at once. A request is in flight from its admission, through its body's arrival and its
generation on a worker thread, until both its answer and its worker are done, so clients that
send their bodies slowly hold places, never threads.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import aclosing

from starlette.requests import ClientDisconnect, Request

from lego_rl.proxy import errors
from lego_rl.proxy.errors import ProxyError


async def read_body(request: Request, cap: int) -> bytes:
    """The request's body; raises a 413 ProxyError as soon as it is known to pass ``cap`` bytes
    (by its Content-Length, before reading, or by what has arrived), and a 400 when the client
    goes away before its body has arrived."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise _too_large(f"{int(declared)} bytes (its Content-Length)", cap)
    chunks: list[bytes] = []
    size = 0
    try:
        async with aclosing(request.stream()) as stream:
            async for chunk in stream:
                size += len(chunk)
                if size > cap:
                    raise _too_large(f"{size} bytes or more", cap)
                chunks.append(chunk)
    except ClientDisconnect:
        message = f"the client went away after {size} bytes of its request body"
        raise ProxyError(400, message, errors.INVALID_REQUEST) from None
    return b"".join(chunks)


def _too_large(size: str, cap: int) -> ProxyError:
    message = (
        f"request body of {size} is over the proxy's limit of {cap} bytes "
        "(ProxyServer max_body_bytes)"
    )
    return ProxyError(413, message, errors.TOO_LARGE)


class Ticket:
    """One admitted request's place in flight, given back when its last holder lets go."""

    def __init__(self, leave: Callable[[], None]) -> None:
        self._leave = leave
        self._holders = 1

    def hold(self) -> None:
        """One more holder (the worker generating for the request)."""
        self._holders += 1

    def release(self) -> None:
        self._holders -= 1
        if self._holders == 0:
            self._leave()


class InFlight:
    """Requests in flight, capped per session and overall. Used on the event loop only."""

    def __init__(self, per_session: int, overall: int) -> None:
        if per_session < 1 or overall < 1:
            raise ValueError(
                f"in-flight caps must be at least 1 (per session {per_session}, overall {overall})"
            )
        self.per_session, self.overall = per_session, overall
        self.total = 0
        self.by_session: dict[str, int] = {}

    def admit(self, session: str) -> Ticket:
        """A place for one more request of ``session``; raises a 429 ProxyError over a cap."""
        held = self.by_session.get(session, 0)
        if held >= self.per_session:
            raise _busy(
                f"session {session!r} has {held} requests in flight, its limit "
                "(ProxyServer max_in_flight_per_session)"
            )
        if self.total >= self.overall:
            raise _busy(
                f"the proxy has {self.total} requests in flight, its limit "
                "(ProxyServer max_in_flight)"
            )
        self.total += 1
        self.by_session[session] = held + 1
        return Ticket(lambda: self._leave(session))

    def _leave(self, session: str) -> None:
        self.total -= 1
        held = self.by_session.pop(session) - 1
        if held:
            self.by_session[session] = held


def _busy(why: str) -> ProxyError:
    return ProxyError(429, f"{why}; retry once one has been answered", errors.RATE_LIMITED)
