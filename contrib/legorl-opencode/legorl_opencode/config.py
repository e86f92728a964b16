"""The ``opencode.json`` of one run: a custom OpenAI-compatible provider on the proxy session.

OpenCode merges it over every other config (it comes as ``OPENCODE_CONFIG_CONTENT``), so a
task repository's own opencode.json cannot point the agent at another model. The policy
serves both the model and the small model (``<model>-small``, which the proxy records as
sub-agent calls). Off: sharing, auto-update, file snapshots (a git copy of the repository at
every step), LSP servers and formatters (no downloads in a trial; a formatter would rewrite
the policy's edits). ``options.config`` can turn any of them back on.
"""

from __future__ import annotations

from typing import Any

from lego_rl.kinds import Endpoint
from legorl_opencode.options import OpenCodeOptions

PROVIDER = "legorl"
KEY_ENV = "LEGORL_API_KEY"
"""The environment variable the provider's API key comes from (``{env:...}`` in the config)."""


def build_config(
    options: OpenCodeOptions, endpoint: Endpoint, timeout: float, limit: dict[str, int] | None
) -> dict[str, Any]:
    """Our settings, then ``options.config`` over them. ``limit``: the model's ``context``
    and ``output`` tokens, so OpenCode asks for the spec's per-call limit (not its 32k)."""
    small = endpoint.small_model or endpoint.model
    model = {"name": endpoint.model, **({"limit": limit} if limit else {})}
    ours: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "model": f"{PROVIDER}/{endpoint.model}",
        "small_model": f"{PROVIDER}/{small}",
        "enabled_providers": [PROVIDER],
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
        "lsp": False,
        "formatter": False,
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "lego-rl proxy",
                "options": {
                    "baseURL": endpoint.base_url.rstrip("/") + "/v1",
                    "apiKey": f"{{env:{KEY_ENV}}}",
                    "timeout": False,
                    "headerTimeout": int(timeout * 1000),
                    "chunkTimeout": int(timeout * 1000),
                },
                "models": {endpoint.model: model, small: {**model, "name": small}},
            }
        },
    }
    return merge(ours, options.config)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into a copy of ``base``, tables recursively, other values replaced."""
    merged = dict(base)
    for key, value in over.items():
        inner = merged.get(key)
        merged[key] = merge(inner, value) if isinstance(inner, dict) and isinstance(value, dict) else value
    return merged
