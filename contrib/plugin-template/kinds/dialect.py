"""The {{name}} dialect: a small completion API served on the proxy's trial sessions.

``POST /v1/complete`` takes ``{"messages": [{"role", "content"}], "max_tokens"?, "temperature"?}``
and answers ``{"id", "text", "finish_reason", "usage"}``; errors are ``{"error": {"type", "message"}}``.
Replace the shapes with those of the API your harness speaks.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from lego_rl import hookimpl
from lego_rl.data import Sampling
from lego_rl.dialect_kit import require
from lego_rl.kinds import ChatCompletion, ChatMessage, ChatRequest
from lego_rl.registry import BuildContext

ROLES = ("system", "user", "assistant")


class {{Class}}Options(BaseModel):
    model_config = ConfigDict(extra="forbid")


class {{Class}}:
    """The {{name}} completion API."""

    name = "{{name}}"
    routes = (("POST", "/v1/complete"),)

    def __init__(self, options: {{Class}}Options, ctx: BuildContext) -> None:
        self.options = options

    def parse(self, body: dict[str, Any]) -> ChatRequest:
        messages = body.get("messages")
        require(isinstance(messages, list) and bool(messages), "messages must be a non-empty list", "messages")
        for m in messages:
            require(isinstance(m, dict) and m.get("role") in ROLES, f"each message needs a role in {ROLES}", "messages")
        sampling = Sampling(
            max_tokens=int(body.get("max_tokens", 256)), temperature=float(body.get("temperature", 1.0))
        )
        return ChatRequest(
            messages=[ChatMessage(role=m["role"], content=str(m.get("content", ""))) for m in messages],
            sampling=sampling,
            model=str(body.get("model", "")),
            raw=body,
        )

    def format(self, request: ChatRequest, completion: ChatCompletion, call_id: str) -> dict[str, Any]:
        return {
            "id": call_id,
            "text": completion.content,
            "finish_reason": completion.finish_reason,
            "usage": {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens},
        }

    def error(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": {"type": kind, "message": message}}

    def conformance_request(self, text: str) -> tuple[str, dict[str, Any]]:
        """A request in this API asking for a reply (the kit's round-trip contract sends it)."""
        return "/v1/complete", {"messages": [{"role": "user", "content": text}], "max_tokens": 64}

    # Optional capabilities (lego_rl.kinds; CONTRIBUTING.md "Optional capabilities"): a
    # method below makes it one, checked with isinstance. conformance_request above is
    # MakesConformanceRequest (the kit drives the first-party APIs with their own SDKs).
    #
    # StreamingDialect: replies as server-sent events, a StreamFormatter per call.
    # def stream(self, request: ChatRequest, call_id: str) -> StreamFormatter: ...
    #
    # ParsesBodies: read the request from its bytes (None: JSON, then parse).
    # def parse_body(self, body: bytes, scope: str = "") -> ChatRequest | None: ...
    #
    # CountsTokens: the proxy answers this route with {"input_tokens": n}.
    # count_tokens_route = ("POST", "/v1/complete/count_tokens")


@hookimpl
def legorl_register_dialect(register) -> None:
    register("{{name}}", {{Class}}, options={{Class}}Options)
