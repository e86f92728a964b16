"""Dialect contracts: routes under the session root, errors in the API's own shape, and round
trips through a real proxy: with the official SDK for the first-party dialects, with a
request the dialect writes itself (``conformance_request``) for any other."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from lego_rl.kinds import MakesConformanceRequest
from lego_rl.testing.contracts.base import (
    ContractEnv,
    ContractError,
    contract,
    expect,
    satisfies_protocol,
)
from lego_rl.testing.contracts.dialect_sdk import (
    SDK_DRIVERS,
    Recorded,
    ToolCall,
    recording_proxy,
)

PROMPT = "legorl conformance: what is 2 + 3?"
TEXT = "2 + 3 = 5, says the scripted policy."
TOOL = ToolCall("run_shell", {"command": "echo 5"})
TOOL_CALL = f'<tool_call>\n{{"name": "{TOOL.name}", "arguments": {json.dumps(TOOL.arguments)}}}\n</tool_call>'
"""The policy's tool call, in its own output format (Qwen3 ``<tool_call>`` blocks)."""
TOOL_OUTPUT = "legorl tool output: 5"
AFTER_TOOL = "The shell printed 5."
STREAMED = "Streamed token by token: five."


@contract("dialect", "structure")
def structure(dialect: Any, env: ContractEnv) -> None:
    """it has the Dialect shape and serves at least one route under the session root"""
    satisfies_protocol(dialect, "dialect")
    expect(isinstance(dialect.name, str) and bool(dialect.name), "dialect needs a name")
    routes = list(dialect.routes)
    expect(bool(routes), "dialect must serve at least one route")
    for method, path in routes:
        expect(method in {"GET", "POST", "HEAD"}, f"bad method {method}")
        expect(path.startswith("/"), f"route {path!r} must start with /")


@contract("dialect", "errors")
def errors(dialect: Any, env: ContractEnv) -> None:
    """error() gives a JSON body that carries the message"""
    body = dialect.error(400, "bad request from the contract", "invalid_request_error")
    text = json.dumps(body)
    expect("bad request from the contract" in text, f"error body lost the message: {text}")


@contract("dialect", "sdk-round-trip")
def sdk_round_trip(dialect: Any, env: ContractEnv) -> None:
    """through the proxy, a client gets the scripted policy's text, tool calls and stream, token-exact"""
    driver = SDK_DRIVERS.get(dialect.name)
    if driver is None:
        _own_request_round_trip(dialect)
        return
    with recording_proxy(dialect, [TEXT, TOOL_CALL, AFTER_TOOL, STREAMED]) as proxy:
        client = driver(proxy.url, proxy.api_key)
        text = _step("a plain completion", client.complete, PROMPT)
        expect(text == TEXT, f"a plain completion: the client read {text!r}, the policy wrote {TEXT!r}")
        calls, after = _step("a tool call round trip", client.tool_round_trip, PROMPT, TOOL.name, TOOL_OUTPUT)
        expect(calls == [TOOL], f"a tool call: the client read {calls}, the policy called {TOOL}")
        expect(
            after == AFTER_TOOL,
            f"after the tool result: the client read {after!r}, the policy wrote {AFTER_TOOL!r}",
        )
        streamed = _step("a streamed completion", client.stream, PROMPT)
        expect(streamed == STREAMED, f"a stream: the client read {streamed!r}, the policy wrote {STREAMED!r}")
    token_exact(proxy, [(TEXT, PROMPT), (TOOL_CALL, PROMPT), (AFTER_TOOL, TOOL_OUTPUT), (STREAMED, PROMPT)])
    expect(
        proxy.records[2].extends_previous,
        "the tool result's request did not extend the tool call's tokens exactly: parse() of the "
        "assistant turn the client sent back must render as the policy wrote it (one segment)",
    )


def token_exact(proxy: Recorded, calls: list[tuple[str, str]]) -> None:
    """Each recorded call sampled its scripted reply (the ids, then eos) from a prompt that
    holds the request's new content; ``calls``: (reply, text the prompt must contain)."""
    records, tok = proxy.records, proxy.tokenizer
    expect(len(records) == len(calls), f"the proxy recorded {len(records)} calls for {len(calls)} requests")
    for index, (record, (reply, needed)) in enumerate(zip(records, calls, strict=True)):
        expect(record.error is None, f"call {index} failed in the proxy: {record.error}")
        sampled = [*tok.encode(reply, add_special_tokens=False), tok.eos_token_id]
        expect(
            list(record.completion_ids) == sampled,
            f"call {index}: the recorded completion ({tok.decode(record.completion_ids)!r}) is not "
            f"what the policy sampled ({reply!r} + eos)",
        )
        prompt = tok.decode(record.prompt_ids)
        expect(
            needed in prompt,
            f"call {index}: the prompt the policy saw lacks the request's {needed!r}, so parse() "
            f"lost it; the prompt was {prompt[-400:]!r}",
        )


def _own_request_round_trip(dialect: Any) -> None:
    expect(
        isinstance(dialect, MakesConformanceRequest),
        f"the kit drives {', '.join(SDK_DRIVERS)} with their official SDKs; for dialect "
        f"{dialect.name!r} add conformance_request(text: str) -> tuple[str, dict]: the path of "
        "one of its routes and a request body in its API's shape that asks, non-streamed, for a "
        "reply to the user message `text`",
    )
    path, body = dialect.conformance_request(PROMPT)
    expect(
        isinstance(path, str) and path.startswith("/") and isinstance(body, dict),
        f"conformance_request must return (route path, JSON body dict), got {(path, body)!r}",
    )
    with recording_proxy(dialect, [TEXT]) as proxy:
        headers = {"authorization": f"Bearer {proxy.api_key}", "x-api-key": proxy.api_key}
        response = httpx.post(proxy.url + path, json=body, headers=headers, timeout=60)
    expect(
        response.status_code == 200,
        f"POST {path} with conformance_request's body answered {response.status_code}: {response.text[:500]}",
    )
    try:
        reply = json.dumps(response.json(), ensure_ascii=False)
    except ValueError:
        raise ContractError(
            f"POST {path} did not answer JSON (ask for a non-streamed reply): {response.text[:300]}"
        ) from None
    expect(TEXT in reply, f"the reply lost the policy's text {TEXT!r}: {reply[:500]}")
    token_exact(proxy, [(TEXT, PROMPT)])


def _step[T](what: str, call: Callable[..., T], *args: Any) -> T:
    try:
        return call(*args)
    except ContractError:
        raise
    except Exception as exc:
        raise ContractError(f"{what} with the official client failed: {type(exc).__name__}: {exc}") from exc
