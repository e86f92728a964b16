"""JSON in and out of the proxy through orjson, with the standard library's meaning.

Out: a streamed reply writes one small object per token; orjson does it ~10x faster. What it
cannot write (integers past 64 bits, keys that are not strings) is written by ``json``.

In: orjson reads a 100 KB request body in half the time ``json`` takes, but reads an integer
outside 64 bits as a float (changing the text of an echoed tool call) and refuses lone
surrogates, which ``json`` keeps. A body with a run of 19 or more digits (the shortest literal
orjson would change, -9223372036854775809, has 19), or one orjson refuses, is read by ``json``;
the digit scan costs a quarter of what orjson saves. The literals NaN, Infinity and -Infinity
are refused by both (not JSON, RFC 8259).

Nesting is limited to :data:`MAX_DEPTH` levels before anything is parsed: a body nested
thousands of levels deep would otherwise overflow the recursion of the readers (msgspec,
``json``) or of whatever walks the value later (the chat template's ``tojson``, ``json.dumps``),
a crash instead of a 400. Real requests nest a dozen levels (tool schemas included)."""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

import orjson
from starlette.responses import JSONResponse

_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
"""Digits to "0", every other byte to a space: a run of digits becomes a run of zeros."""
_LONG_RUN = b"0" * 19


MAX_DEPTH = 128
"""The deepest nesting of arrays and objects a JSON text may have (the body itself is level 1)."""
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
"""A JSON string (linear: the unrolled loop cannot backtrack)."""
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def depth(raw: bytes) -> int:
    """How deep arrays and objects nest in the JSON text ``raw`` (brackets inside strings do not
    count; for a text that is not JSON, a bound the parser's own error then replaces)."""
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(brackets, lambda d, b: d + (1 if b in b"[{" else -1), initial=0))


class TooDeep(ValueError):
    """A JSON text nested deeper than the proxy reads."""


def check_depth(raw: bytes | str, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`TooDeep` (a ValueError) when ``raw`` nests deeper than ``limit`` levels.
    Free for a text with fewer brackets than that (most texts the proxy reads: a message, a
    field)."""
    if isinstance(raw, str):
        if raw.count("[") + raw.count("{") <= limit:
            return
        raw = raw.encode("utf-8", "surrogatepass")
    if raw.count(b"[") + raw.count(b"{") > limit and depth(raw) > limit:
        raise TooDeep(f"JSON nested deeper than {limit} levels of arrays and objects")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def loads(raw: bytes) -> Any:
    """``json.loads(raw)`` without NaN or infinities, through orjson where that is exact.
    Raises ValueError (JSONDecodeError, UnicodeDecodeError) on what is not JSON, or nests
    deeper than :data:`MAX_DEPTH`."""
    check_depth(raw)
    if _LONG_RUN not in raw.translate(_DIGITS):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # json says what is wrong, or reads what orjson refuses (lone surrogates)
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except RecursionError:  # not reached below MAX_DEPTH; kept as the reader's own limit
        raise TooDeep("JSON nested too deep to read") from None


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON (non-ASCII written as is), as Starlette's JSONResponse writes it. A
    lone surrogate (which :func:`loads` keeps, as ``json`` does) has no UTF-8: a value holding
    one is written with every non-ASCII character escaped, the same value in valid UTF-8."""
    try:
        return orjson.dumps(value)
    except TypeError:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode()


def dumps_text(value: Any) -> str:
    return dumps(value).decode()


class FastJSONResponse(JSONResponse):
    """A JSONResponse written by :func:`dumps`."""

    def render(self, content: Any) -> bytes:
        return dumps(content)
