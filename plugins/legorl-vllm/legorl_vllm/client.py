"""HTTP client of vLLM's OpenAI-compatible ``/v1/completions`` with token-id prompts.

Targets ``vllm serve`` >= 0.33 (the request and response fields below are those of
``vllm/entrypoints/openai/completion/protocol.py`` there):

- request: ``prompt`` as a list of token ids, ``logprobs: 0`` (the sampled token's log-prob
  only), ``return_token_ids`` (``choices[0].token_ids``; in a stream, the delta of each chunk),
  ``return_tokens_as_token_ids`` (``logprobs.tokens`` as ``"token_id:N"``, the fallback when a
  server omits ``token_ids``), ``stop_token_ids``, ``stop`` (strings), ``seed``, ``top_k``, ``stream``;
- routed experts (``--enable-return-routed-experts``): non-streaming responses only, in
  ``choices[0].routed_experts``, a base64 ``.npy`` array ``(num_tokens - 1, layers, k)`` over
  prompt + completion from ``routed_experts_prompt_start`` on (the last sampled token has not
  been forwarded, so it has none);
- errors: a JSON ``{"error": {"message", "type", "code"}}`` body (older servers: the same
  fields at the top level, FastAPI: ``{"detail"}``); in a stream, a ``data: {"error": ...}``
  event.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from lego_rl.data import Sampling

TOKEN_ID_PREFIX = "token_id:"


class VLLMError(RuntimeError):
    """The vLLM server refused or failed a request; the message says which and why."""


@dataclass
class Completion:
    """What one ``/v1/completions`` call sampled."""

    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "stop"


def completion_body(
    model: str, prompt_ids: list[int], sampling: Sampling, *, stream: bool
) -> dict[str, Any]:
    """The request body that samples from ``prompt_ids`` with ``sampling``."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": list(prompt_ids),
        "max_tokens": sampling.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "stop_token_ids": list(sampling.stop_token_ids),
        "logprobs": 0,
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
        "skip_special_tokens": False,
        "stream": stream,
    }
    if sampling.stop:
        body["stop"] = list(sampling.stop)  # vLLM stops there itself; the proxy cuts the rest
    if sampling.top_k > 0:
        body["top_k"] = sampling.top_k
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    return body


def error_message(status: int, text: str) -> str:
    """The server's own error message out of an error body, whatever its era's shape."""
    try:
        body = json.loads(text)
    except ValueError:
        return f"HTTP {status}: {text.strip()[:500] or 'empty body'}"
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            message = inner.get("message") or inner.get("detail")
            if message:
                kind = inner.get("type", "")
                return f"HTTP {status} {kind}: {message}".replace("  ", " ")
        if isinstance(inner, str):
            return f"HTTP {status}: {inner}"
    return f"HTTP {status}: {text.strip()[:500]}"


def decode_routed_experts(payload: str) -> np.ndarray:
    """``(tokens, layers, k)`` expert ids from vLLM's base64 ``.npy`` payload."""
    try:
        array = np.load(io.BytesIO(base64.b64decode(payload)), allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise VLLMError(f"routed_experts is not a base64 .npy array: {exc}") from exc
    if array.ndim != 3:
        raise VLLMError(
            f"routed_experts has shape {array.shape}; expected (tokens, layers, k)"
        )
    return array


def encode_routed_experts(array: np.ndarray) -> str:
    """The inverse of :func:`decode_routed_experts` (what a server sends)."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _choice_tokens(choice: dict[str, Any]) -> tuple[list[int], list[float]]:
    """Token ids and sampled log-probs of one (full or delta) choice."""
    logprobs = choice.get("logprobs") or {}
    values = logprobs.get("token_logprobs")
    ids = choice.get("token_ids")
    if ids is None:
        tokens = logprobs.get("tokens") or []
        if not all(
            isinstance(t, str) and t.startswith(TOKEN_ID_PREFIX) for t in tokens
        ):
            raise VLLMError(
                "the server returned neither token_ids nor 'token_id:N' tokens; it needs "
                "return_token_ids / return_tokens_as_token_ids support (vLLM >= 0.10.2)"
            )
        ids = [int(t[len(TOKEN_ID_PREFIX) :]) for t in tokens]
    if values is None:
        if ids:
            raise VLLMError(
                "the server returned no logprobs.token_logprobs for the sampled tokens"
            )
        values = []
    if len(values) != len(ids) or any(v is None for v in values):
        raise VLLMError(
            f"the server returned {len(ids)} tokens but log-probs {values!r}"
        )
    return [int(i) for i in ids], [float(v) for v in values]


class CompletionClient:
    """Blocking calls to one vLLM server (thread-safe: httpx pools the connections)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        request_timeout_s: float = 1800.0,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(request_timeout_s, connect=connect_timeout_s),
        )

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------ plain calls

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """One call; returns the decoded JSON (None for an empty body), raises VLLMError."""
        try:
            response = self._http.request(method, path, json=json_body, params=params)
        except httpx.HTTPError as exc:
            raise VLLMError(
                f"vLLM server at {self.base_url} unreachable ({method} {path}): {exc}"
            ) from exc
        if response.status_code >= 400:
            raise VLLMError(
                f"vLLM {method} {path} failed: {error_message(response.status_code, response.text)}"
            )
        return response.json() if response.content else None

    def healthy(self) -> bool:
        """Whether ``GET /health`` answers 200 now."""
        try:
            return self._http.get("/health", timeout=5.0).status_code == 200
        except httpx.HTTPError:
            return False

    def served_models(self) -> list[str]:
        return [m["id"] for m in self.request("GET", "/v1/models").get("data", [])]

    # ------------------------------------------------------------ generation

    def complete(
        self,
        prompt_ids: list[int],
        sampling: Sampling,
        *,
        stream: bool,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Completion:
        """Sample one completion; with ``stream``, ``on_token`` runs as each token arrives."""
        body = completion_body(self.model, prompt_ids, sampling, stream=stream)
        if not stream:
            out = Completion()
            choice = self._one_choice(
                self.request("POST", "/v1/completions", json_body=body)
            )
            out.token_ids, out.logprobs = _choice_tokens(choice)
            out.finish_reason = choice.get("finish_reason") or "stop"
            if on_token is not None:
                for token, logprob in zip(out.token_ids, out.logprobs, strict=True):
                    on_token(token, logprob)
            return out
        return self._stream(body, on_token)

    def routing(self, token_ids: list[int], start: int) -> np.ndarray:
        """Experts of ``token_ids[start:]`` as the server routes them at prefill:
        ``(len(token_ids) - start, layers, k)``.

        One extra forward of ``token_ids`` (prefix-cached, so mostly free) that samples one
        throw-away token: vLLM returns routing for every token it has forwarded.
        """
        body = {
            "model": self.model,
            "prompt": list(token_ids),
            "max_tokens": 1,
            "temperature": 0.0,
            "routed_experts_prompt_start": start,
        }
        choice = self._one_choice(
            self.request("POST", "/v1/completions", json_body=body)
        )
        payload = choice.get("routed_experts")
        if payload is None:
            raise VLLMError(
                "the server returned no routed_experts; start it with --enable-return-routed-experts "
                "(vLLM >= 0.33) or set inference.options.enable_routing_replay: false"
            )
        experts = decode_routed_experts(payload)
        if experts.shape[0] != len(token_ids) - start:
            raise VLLMError(
                f"routed_experts covers {experts.shape[0]} tokens; expected {len(token_ids) - start} "
                f"(tokens {start}..{len(token_ids) - 1})"
            )
        return experts

    def score(self, token_ids: list[int], start: int) -> list[float]:
        """Log-probs of ``token_ids[start:]`` as the server scores them at prefill
        (``prompt_logprobs``; vLLM computes them from the raw logits, as its sampled ones)."""
        body = {
            "model": self.model,
            "prompt": list(token_ids),
            "max_tokens": 1,
            "temperature": 0.0,
            "prompt_logprobs": 0,
        }
        choice = self._one_choice(self.request("POST", "/v1/completions", json_body=body))
        rows = choice.get("prompt_logprobs")
        if not isinstance(rows, list) or len(rows) != len(token_ids):
            raise VLLMError(f"the server returned no prompt_logprobs for {len(token_ids)} tokens: {str(rows)[:200]}")
        out = []
        for token, row in zip(token_ids[start:], rows[start:], strict=True):
            entry = row.get(str(token)) if isinstance(row, dict) else None
            if not isinstance(entry, dict) or "logprob" not in entry:
                raise VLLMError(f"prompt_logprobs lacks token {token}: {str(row)[:200]}")
            out.append(float(entry["logprob"]))
        return out

    def _one_choice(self, body: Any) -> dict[str, Any]:
        choices = body.get("choices") if isinstance(body, dict) else None
        if not choices:
            raise VLLMError(f"vLLM returned no choices: {str(body)[:300]}")
        return choices[0]

    def _stream(
        self, body: dict[str, Any], on_token: Callable[[int, float], None] | None
    ) -> Completion:
        out = Completion(finish_reason="")
        try:
            with self._http.stream("POST", "/v1/completions", json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    raise VLLMError(
                        "vLLM POST /v1/completions failed: "
                        + error_message(response.status_code, response.text)
                    )
                for event in _sse_events(response.iter_lines()):
                    if "error" in event:
                        raise VLLMError(
                            "vLLM stream failed: "
                            + error_message(
                                event["error"].get("code", 500), json.dumps(event)
                            )
                        )
                    for choice in event.get("choices") or []:
                        ids, logprobs = _choice_tokens(choice)
                        for token, logprob in zip(ids, logprobs, strict=True):
                            out.token_ids.append(token)
                            out.logprobs.append(logprob)
                            if on_token is not None:
                                on_token(token, logprob)
                        if choice.get("finish_reason"):
                            out.finish_reason = choice["finish_reason"]
        except httpx.HTTPError as exc:
            raise VLLMError(f"vLLM stream from {self.base_url} broke: {exc}") from exc
        if not out.finish_reason:
            raise VLLMError(
                "vLLM stream ended without a finish_reason (server stopped mid-generation?)"
            )
        return out


def _sse_events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The JSON payloads of ``data:`` lines up to ``[DONE]``."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            return
        try:
            event = json.loads(data)
        except ValueError as exc:
            raise VLLMError(
                f"vLLM sent a malformed stream event: {data[:200]}"
            ) from exc
        if isinstance(event, dict):
            yield event
