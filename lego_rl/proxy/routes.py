"""What the proxy serves at a path below a session, and whose API's errors a path answers with.

An error answered before the session is known (an unknown session or a wrong key, an unknown
path) takes the shape of the dialect whose route the path is, so each SDK reads it as its own
API's error; a path no dialect serves answers in OpenAI's shape.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Literal

from lego_rl.kinds import CountsTokens, Dialect
from lego_rl.proxy.errors import ErrorShape, openai_error

Use = Literal["call", "count", "models"]
MODELS = ("GET", "/v1/models")
"""Served in every dialect: the one model the proxy serves."""


def normalized(path: str) -> str:
    return "/" + path.strip("/")


def _served(dialect: Dialect) -> Iterator[tuple[tuple[str, str], Use]]:
    for route in dialect.routes:
        yield route, "call"
    if isinstance(dialect, CountsTokens):
        yield dialect.count_tokens_route, "count"
    yield MODELS, "models"


class Routes:
    """The routes of every loaded dialect, by path then method."""

    def __init__(self, dialects: Mapping[str, Dialect]) -> None:
        self._served: dict[str, dict[str, dict[str, Use]]] = {}
        self._shapes: dict[str, ErrorShape] = {}
        for name, dialect in dialects.items():
            table = self._served[name] = {}
            for (method, path), use in _served(dialect):
                table.setdefault(normalized(path), {})[method.upper()] = use
                if use != "models":
                    self._shapes.setdefault(normalized(path), dialect.error)

    def at(self, dialect: str, path: str) -> Mapping[str, Use]:
        """What ``dialect`` serves at ``path``, by method (empty: nothing)."""
        return self._served[dialect].get(normalized(path), {})

    def shape(self, path: str) -> ErrorShape:
        """The error shape of the API whose route ``path`` is (OpenAI's when none)."""
        return self._shapes.get(normalized(path), openai_error)
