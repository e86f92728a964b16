"""The ``$CODEX_HOME/config.toml`` of one run: a custom model provider pointed at the proxy.

Codex speaks only the Responses API to a custom provider (``wire_api = "responses"``). Its
turn limit is the proxy session's call limit: ``codex exec`` has no flag for one. Off by
default: analytics, update checks, plugins, hosted web search (no network in a trial) and
sub-agents (``agents.enabled``: their tools come as a ``namespace`` tool, which the proxy does
not serve); ``options.config`` can turn any of them back on.
"""

from __future__ import annotations

import json
from typing import Any

from lego_rl.harness_kit import deep_merge
from lego_rl.kinds import Endpoint
from legorl_codex.options import CodexOptions

PROVIDER = "legorl"
KEY_ENV = "LEGORL_API_KEY"
"""The environment variable the provider reads its API key from (``env_key``)."""


def build_config(options: CodexOptions, endpoint: Endpoint, timeout: float, context: int | None) -> dict[str, Any]:
    """Our settings, then ``options.config`` over them."""
    ours: dict[str, Any] = {
        "model": endpoint.model,
        "model_provider": PROVIDER,
        "check_for_update_on_startup": False,
        "web_search": "disabled",
        "analytics": {"enabled": False},
        "features": {"plugins": False},
        "agents": {"enabled": False},
        "model_providers": {
            PROVIDER: {
                "name": "lego-rl proxy",
                "base_url": endpoint.base_url.rstrip("/") + "/v1",
                "wire_api": "responses",
                "env_key": KEY_ENV,
                "request_max_retries": options.retries,
                "stream_max_retries": options.retries,
                "stream_idle_timeout_ms": int(timeout * 1000),
            }
        },
    }
    if context is not None:
        ours["model_context_window"] = context
    return deep_merge(ours, options.config)


def to_toml(table: dict[str, Any], prefix: str = "") -> str:
    """TOML of nested tables of strings, numbers, booleans and lists of them."""
    scalars = [f"{_key(k)} = {_value(v)}" for k, v in table.items() if not isinstance(v, dict)]
    lines = ([f"[{prefix}]"] if prefix and scalars else []) + scalars
    for key, value in table.items():
        if isinstance(value, dict):
            inner = to_toml(value, f"{prefix}.{_key(key)}" if prefix else _key(key))
            lines += ["", inner] if lines else [inner]
    return "\n".join(lines)


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} {value!r} to Codex's config.toml")
