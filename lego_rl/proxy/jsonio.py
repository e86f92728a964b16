"""JSON out of the proxy through orjson (a streamed reply writes one small object per token;
orjson does it ~10x faster), with the standard library's meaning: what orjson cannot write
(integers past 64 bits, keys that are not strings) is written by ``json``.

Request bodies are read by ``json``, not orjson: orjson reads an integer past 64 bits as a
float, which would change the text of an echoed tool call, and detecting such a literal costs
more than orjson saves."""

from __future__ import annotations

import json
from typing import Any

import orjson
from starlette.responses import JSONResponse


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON (non-ASCII written as is), as Starlette's JSONResponse writes it."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def dumps_text(value: Any) -> str:
    return dumps(value).decode()


class FastJSONResponse(JSONResponse):
    """A JSONResponse written by :func:`dumps`."""

    def render(self, content: Any) -> bytes:
        return dumps(content)
