"""Dialect contracts: routes under the session root and errors in the API's own shape."""

from __future__ import annotations

import json
from typing import Any

from lego_rl.testing.contracts.base import ContractEnv, contract, expect, satisfies_protocol


@contract("dialect", "structure")
def structure(dialect: Any, env: ContractEnv) -> None:
    """it has the Dialect shape and serves at least one route under the session root"""
    satisfies_protocol(dialect, "dialect")
    expect(isinstance(dialect.name, str) and dialect.name, "dialect needs a name")
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
