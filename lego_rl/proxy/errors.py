"""Errors a proxy call can end in, and the error kinds every dialect maps to its own shape.

A dialect's ``parse`` raises :class:`BadRequest`; the server turns any :class:`ProxyError`
into ``dialect.error(status, message, kind)``. Kinds are a small shared vocabulary so each
dialect can map them (OpenAI puts the kind in ``error.code``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

INVALID_REQUEST = "invalid_request"
CONTEXT_LENGTH = "context_length_exceeded"
INVALID_API_KEY = "invalid_api_key"
NOT_FOUND = "not_found"
MAX_CALLS = "max_calls_exceeded"
UNSUPPORTED = "unsupported"
SERVER_ERROR = "server_error"
TOO_LARGE = "request_too_large"
RATE_LIMITED = "rate_limit_exceeded"
METHOD_NOT_ALLOWED = "method_not_allowed"

ErrorShape = Callable[[int, str, str], dict[str, Any]]
"""An error body in one API's shape: a dialect's ``error(status, message, kind)``."""


class ProxyError(Exception):
    """A call that ends in an HTTP error answered in the session's dialect."""

    def __init__(self, status: int, message: str, kind: str, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param


class BadRequest(ProxyError):
    """The request body is malformed or asks for something the proxy does not serve (400)."""

    def __init__(self, message: str, *, param: str | None = None, kind: str = INVALID_REQUEST):
        super().__init__(400, message, kind, param)


def openai_error(status: int, message: str, kind: str, param: str | None = None) -> dict[str, Any]:
    """An error body in OpenAI's shape; also the proxy's shape where no dialect is known yet."""
    kind_type = "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": message, "type": kind_type, "param": param, "code": kind}}


def require(condition: bool, message: str, param: str) -> None:
    """Raise a BadRequest naming ``param`` unless ``condition`` holds."""
    if not condition:
        raise BadRequest(message, param=param)
