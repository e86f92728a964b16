"""Contracts of the dialect capabilities: a dialect that reads bodies from their bytes
(:class:`~lego_rl.kinds.ParsesBodies`) reads them as ``parse`` does, and one with a
token-counting route (:class:`~lego_rl.kinds.CountsTokens`) counts what a call's prompt takes.
Both drive the dialect's round trip (``dialect.sdk-round-trip``) for real request bodies."""

from __future__ import annotations

import json
from typing import Any

import httpx

from lego_rl.kinds import ChatRequest, CountsTokens, ParsesBodies
from lego_rl.testing.contracts.base import ContractEnv, contract, expect
from lego_rl.testing.contracts.dialect import TEXT, sdk_round_trip
from lego_rl.testing.contracts.dialect_sdk import recording_proxy
from lego_rl.wrapping import expose

COMPARED = ("messages", "tools", "sampling", "model", "stream", "dropped_tools")
"""What ``parse_body`` must read as ``parse`` does (``raw`` may hold less)."""


class BodyTap:
    """The dialect under test, keeping every request body the proxy hands it and what its
    ``parse_body`` (when it has one) read from it; everything else is the dialect's own."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.read: list[tuple[bytes, ChatRequest | None]] = []
        expose(self, inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def parse_body(self, body: bytes, scope: str = "") -> ChatRequest | None:
        request = self.inner.parse_body(body, scope) if isinstance(self.inner, ParsesBodies) else None
        self.read.append((body, request))
        return request


def round_trip_bodies(dialect: Any, env: ContractEnv) -> list[tuple[bytes, ChatRequest | None]]:
    """The request bodies of the dialect's round trip, each with what ``parse_body`` read."""
    tap = BodyTap(dialect)
    sdk_round_trip(tap, env)
    expect(bool(tap.read), "the round trip sent the proxy no request body")
    return tap.read


@contract("dialect", "parse-body")
def parse_body_agrees(dialect: Any, env: ContractEnv) -> None:
    """where offered, parse_body reads each body of a session as parse reads its JSON"""
    kind: Any = dialect  # the Dialect beside the capability (isinstance narrows the name)
    if not isinstance(dialect, ParsesBodies):
        return
    for index, (body, read) in enumerate(round_trip_bodies(dialect, env)):
        if read is None:
            continue
        parsed = kind.parse(json.loads(body))
        for name in COMPARED:
            mine, theirs = getattr(read, name), getattr(parsed, name)
            expect(
                mine == theirs,
                f"request {index}: parse_body read {name} {mine!r}, parse read {theirs!r}",
            )


@contract("dialect", "count-tokens")
def counts_tokens(dialect: Any, env: ContractEnv) -> None:
    """where offered, the counting route answers the prompt tokens the same request's call takes"""
    routes = list(dialect.routes)  # the Dialect's own, read before isinstance narrows the name
    if not isinstance(dialect, CountsTokens):
        return
    method, path = dialect.count_tokens_route
    expect(method == "POST" and path.startswith("/"), f"count_tokens_route {method} {path}: POST /<path> expected")
    expect(
        (method, path) not in [tuple(r) for r in routes],
        f"count_tokens_route {path} is one of the dialect's call routes",
    )
    body = json.loads(round_trip_bodies(dialect, env)[0][0])
    body.pop("stream", None)
    call_method, call_path = next(iter(routes))
    with recording_proxy(dialect, [TEXT]) as proxy:
        headers = {"authorization": f"Bearer {proxy.api_key}", "x-api-key": proxy.api_key}
        counted = httpx.post(proxy.url + path, json=body, headers=headers, timeout=60)
        expect(counted.status_code == 200, f"POST {path} answered {counted.status_code}: {counted.text[:500]}")
        answer = httpx.request(call_method, proxy.url + call_path, json=body, headers=headers, timeout=60)
        expect(answer.status_code == 200, f"{call_method} {call_path} answered {answer.status_code}: {answer.text[:500]}")
    n = counted.json().get("input_tokens")
    expect(
        n == len(proxy.records[0].prompt_ids),
        f"the counting route says {n} input tokens; the same request's call rendered "
        f"{len(proxy.records[0].prompt_ids)}",
    )
