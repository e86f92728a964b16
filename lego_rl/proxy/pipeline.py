"""One model call, start to end: parse, render, generate, record, parse the reply, format.

Blocking (the inference backend is): the server runs :meth:`CallHandler.handle` in a worker
thread. Every generation, failed or not, becomes a CallRecord before anything can go wrong
in formatting, so records are never lost.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lego_rl.data import CallRecord, Generation, Sampling
from lego_rl.kinds import ChatCompletion, ChatRequest, Dialect, Inference
from lego_rl.proxy import errors
from lego_rl.proxy.errors import BadRequest, ProxyError
from lego_rl.proxy.render import decode, render_prompt
from lego_rl.proxy.session import ProxySession
from lego_rl.proxy.toolcalls import parse_completion


def stop_ids(tokenizer: Any, sampling: Sampling) -> list[int]:
    """The session's stop ids plus the tokenizer's eos, without duplicates."""
    eos = getattr(tokenizer, "eos_token_id", None)
    extra = [eos] if isinstance(eos, int) else list(eos or [])
    return list(dict.fromkeys([*sampling.stop_token_ids, *extra]))


def effective_sampling(
    session: Sampling, requested: Sampling, *, room: int, stop: list[int]
) -> Sampling:
    """The session's distribution; a request may only lower max_tokens (and pick a seed when the
    session has none). ``room`` is what the context has left after the prompt."""
    max_tokens = min(session.max_tokens, room)
    if "max_tokens" in requested.model_fields_set:
        max_tokens = min(max_tokens, requested.max_tokens)
    seed = session.seed if session.seed is not None else requested.seed
    return session.model_copy(
        update={"max_tokens": max_tokens, "stop_token_ids": stop, "seed": seed}
    )


def check_generation(gen: Generation, max_tokens: int) -> None:
    """The trainer relies on these lengths lining up; refuse a backend that breaks them."""
    n = len(gen.completion_ids)
    if len(gen.logprobs) != n:
        raise ValueError(f"backend returned {n} completion ids but {len(gen.logprobs)} logprobs")
    if gen.routing is not None and len(gen.routing) != n:
        raise ValueError(f"backend returned {n} completion ids but routing for {len(gen.routing)}")
    if n > max_tokens:
        raise ValueError(f"backend returned {n} tokens, over max_tokens={max_tokens}")


def to_completion(
    tokenizer: Any, gen: Generation, stop: list[int], prompt_tokens: int
) -> ChatCompletion:
    """The reply as the harness will see it: the text without trailing stop tokens, parsed."""
    ids = list(gen.completion_ids)
    while ids and ids[-1] in stop:
        ids.pop()
    parsed = parse_completion(decode(tokenizer, ids))
    finish = "length" if gen.finish_reason == "length" else "stop"
    return ChatCompletion(
        content=parsed.content,
        reasoning=parsed.reasoning,
        tool_calls=parsed.tool_calls,
        finish_reason="tool_calls" if parsed.tool_calls else finish,
        prompt_tokens=prompt_tokens,
        completion_tokens=len(gen.completion_ids),
    )


@dataclass
class CallHandler:
    """What every call needs from the server; ``handle`` serves one request body."""

    inference: Inference
    model_name: str
    max_context: int
    template: str | None = None
    on_call: Callable[[CallRecord], None] | None = None

    def handle(
        self, session: ProxySession, dialect: Dialect, body: dict[str, Any]
    ) -> dict[str, Any]:
        request = dialect.parse(body)
        if request.stream:
            raise BadRequest(
                "stream is not supported yet; send the request with stream: false",
                param="stream",
                kind=errors.UNSUPPORTED,
            )
        request.model = request.model or self.model_name
        with session.lock:
            record, gen = self._generate(session, request)
        self._notify(session, record)
        if gen is None:
            raise ProxyError(500, f"inference backend failed: {record.error}", errors.SERVER_ERROR)
        tokenizer = self.inference.tokenizer
        completion = to_completion(
            tokenizer, gen, stop_ids(tokenizer, session.sampling), len(record.prompt_ids)
        )
        return dialect.format(
            request, completion, f"{session.id}-{record.index}-{uuid.uuid4().hex[:8]}"
        )

    def _generate(
        self, session: ProxySession, request: ChatRequest
    ) -> tuple[CallRecord, Generation | None]:
        """Render and generate under the session lock; the record is appended either way."""
        if session.max_calls is not None and session.generations >= session.max_calls:
            session.limit_hit = True
            raise ProxyError(
                400,
                f"session {session.id} reached its limit of {session.max_calls} model calls",
                errors.MAX_CALLS,
            )
        tokenizer = self.inference.tokenizer
        rendered = render_prompt(tokenizer, request, session.last_call, self.template)
        room = self.max_context - len(rendered.ids)
        if room < 1:
            session.context_overflow = True
            message = (
                f"this model's maximum context length is {self.max_context} tokens; the prompt has "
                f"{len(rendered.ids)} tokens, leaving no room for a completion"
            )
            session.errors.append(message)
            raise ProxyError(400, message, errors.CONTEXT_LENGTH, "messages")
        sampling = effective_sampling(
            session.sampling,
            request.sampling,
            room=room,
            stop=stop_ids(tokenizer, session.sampling),
        )
        record = CallRecord(
            session=session.id,
            index=len(session.calls),
            dialect=session.dialect,
            model=request.model,
            prompt_ids=rendered.ids,
            completion_ids=[],
            logprobs=[],
            extends_previous=rendered.extends_previous,
            subagent=session.subagent,
            started_at=time.time(),
        )
        gen: Generation | None = None
        try:
            gen = self.inference.generate(rendered.ids, sampling)
            check_generation(gen, sampling.max_tokens)
        except Exception as exc:  # noqa: BLE001 - any backend failure is recorded, then a 500
            gen = None
            record.error = f"{type(exc).__name__}: {exc}"
            session.errors.append(f"call {record.index}: {record.error}")
        else:
            record.completion_ids = list(gen.completion_ids)
            record.logprobs = list(gen.logprobs)
            record.routing = gen.routing
            record.prompt_routing = gen.prompt_routing
            record.finish_reason = gen.finish_reason
            record.policy_version = gen.policy_version
        record.ended_at = time.time()
        session.calls.append(record)
        return record, gen

    def _notify(self, session: ProxySession, record: CallRecord) -> None:
        if self.on_call is None:
            return
        try:
            self.on_call(record)
        except Exception as exc:  # noqa: BLE001 - an observer must not fail the harness's call
            session.errors.append(
                f"on_call failed for call {record.index}: {type(exc).__name__}: {exc}"
            )
