"""Request-parsing helpers every dialect shares."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from lego_rl.data import Sampling
from lego_rl.kinds import ChatMessage, ChatRequest
from lego_rl.proxy import jsonio
from lego_rl.proxy.errors import BadRequest, require

Settings = tuple[Sampling, str, bool]
"""What a request's top-level fields set: its sampling, model name and whether it streams."""


def checked(
    settings: Callable[[dict[str, Any]], Settings], body: dict[str, Any]
) -> tuple[dict[str, Any], Settings | None]:
    """``body`` with its ``settings``, or None where a check fails (a dialect reading a body as
    texts memoises this; the full read then reports the failure, in the dialect's order)."""
    try:
        return body, settings(body)
    except BadRequest:
        return body, None


def chat_request(
    raw: dict[str, Any],
    messages: list[ChatMessage],
    tools: list[dict[str, Any]],
    settings: Settings,
    dropped_tools: list[str] | None = None,
) -> ChatRequest:
    """The request from its parsed parts; ``raw`` holds the body's top-level fields (a body
    read as texts may leave out those parsed into the request itself); ``dropped_tools`` the
    hosted tools left out of ``tools``."""
    sampling, model, stream = settings
    return ChatRequest(
        messages=messages,
        tools=tools,
        sampling=sampling,
        model=model,
        stream=stream,
        raw=raw,
        dropped_tools=list(dropped_tools or ()),
    )


def stream_flag(body: dict[str, Any]) -> bool:
    """``stream``: a boolean; absent or null is false (a string such as "false" is a 400)."""
    stream = body.get("stream")
    require(stream is None or isinstance(stream, bool), "stream must be a boolean", "stream")
    return bool(stream)


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for an error message about a field."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


Role = Literal["system", "user", "assistant", "tool"]
"""A neutral message role (:attr:`lego_rl.kinds.ChatMessage.role`): what a dialect's role
table maps its own roles to (:func:`role_of`)."""


def role_of[R: str](raw: dict[str, Any], roles: Mapping[str, R], param: str) -> R:
    """The neutral role of a message's ``role`` (a key of ``roles``); a BadRequest otherwise."""
    role = raw.get("role")
    found = roles.get(role) if isinstance(role, str) else None
    if found is None:
        raise BadRequest(f"unsupported role {shown(role)} (use one of {', '.join(roles)})", param=f"{param}.role")
    return found


def string_field(raw: dict[str, Any], key: str, param: str) -> str:
    """An optional string field of ``raw``: absent or null is ""; anything but a string a
    BadRequest naming ``param.key``."""
    value = raw.get(key)
    if value is None:
        return ""
    require(isinstance(value, str), f"{key} must be a string", f"{param}.{key}")
    return value


def object_field(raw: dict[str, Any], key: str, param: str) -> dict[str, Any] | None:
    """An optional object field of ``raw``: absent or null is None; anything but an object a
    BadRequest naming ``param.key``."""
    value = raw.get(key)
    require(value is None or isinstance(value, dict), f"{key} must be an object", f"{param}.{key}")
    return value


def json_object(body: bytes) -> dict[str, Any]:
    """A request body read as a JSON object; a BadRequest saying what is wrong otherwise."""
    try:
        value = jsonio.loads(body)
    except jsonio.TooDeep as exc:
        raise BadRequest(f"request body cannot be read: {exc}") from exc
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise BadRequest(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise BadRequest("request body must be a JSON object")
    return value


def request_sampling(
    body: dict[str, Any],
    max_keys: Sequence[str],
    stop_key: str | None = None,
    stop_limit: int | None = None,
) -> Sampling:
    """The sampling fields a request sets (only those, so the proxy tells them from defaults).
    Of ``max_keys`` (the dialect's names for the completion budget) the last one set wins;
    ``stop_key`` names the dialect's stop strings (a string or a list of at most ``stop_limit``)."""
    fields: dict[str, Any] = {}
    if stop_key is not None and body.get(stop_key) is not None:
        fields["stop"] = stop_strings(body[stop_key], stop_key, stop_limit)
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            require(isinstance(body[key], int | float), f"{key} must be a number", key)
            fields[key] = float(body[key])
    if body.get("top_k") is not None:
        require(isinstance(body["top_k"], int), "top_k must be an integer", "top_k")
        fields["top_k"] = body["top_k"]
    for key in max_keys:
        if body.get(key) is not None:
            require(
                isinstance(body[key], int) and body[key] >= 1,
                f"{key} must be a positive integer",
                key,
            )
            fields["max_tokens"] = body[key]
    if body.get("seed") is not None:
        require(isinstance(body["seed"], int), "seed must be an integer", "seed")
        fields["seed"] = body["seed"]
    return Sampling(**fields)


def stop_strings(value: Any, param: str, limit: int | None) -> list[str]:
    """A request's stop strings: one string or a list of them."""
    stops = [value] if isinstance(value, str) else value
    require(
        isinstance(stops, list) and all(isinstance(s, str) and s for s in stops),
        f"{param} must be a non-empty string or a list of non-empty strings",
        param,
    )
    require(limit is None or len(stops) <= limit, f"{param} takes at most {limit} strings", param)
    return stops


def model_name(body: dict[str, Any]) -> str:
    model = body.get("model") or ""
    require(isinstance(model, str), "model must be a string", "model")
    return model


def text_of(content: Any, param: str, kinds: frozenset[str] = frozenset({"text"})) -> str:
    """Content as text: a string, null, or a list of text parts/blocks (of ``kinds``), joined
    by newlines. Any other part (images, files) is a BadRequest naming it."""
    if content is None or isinstance(content, str):
        return content or ""
    require(isinstance(content, list), "content must be a string or a list of parts", param)
    texts = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        require(
            isinstance(kind, str) and kind in kinds and isinstance(part.get("text"), str),
            f"only text content parts are supported here (got type {shown(kind)})",
            f"{param}[{i}]",
        )
        texts.append(part["text"])
    return "\n".join(texts)
