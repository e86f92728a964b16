"""One model call, start to end: parse, render, generate, record, parse the reply, format.

Blocking (the inference backend is): the server runs :meth:`CallHandler.serve` in a worker
thread and reads its replies from a queue. A streamed call sends the dialect's SSE events as
the backend samples each token (``on_token``); a plain call sends one JSON body. Every
generation, failed or not, becomes a CallRecord before anything can go wrong in formatting,
so records are never lost.

A call's ``abort`` event is set when its client goes away: a backend that
:class:`~lego_rl.kinds.AbortsGenerations` stops there (others are stopped at their next
streamed token, or run to the end of a plain call), and the call is recorded with
``finish_reason`` :data:`~lego_rl.data.CLIENT_DISCONNECT`, which the recorder never trains.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from lego_rl.data import ABORTED, CLIENT_DISCONNECT, CallRecord, Generation, Sampling
from lego_rl.kinds import (
    AbortsGenerations,
    ChatCompletion,
    ChatRequest,
    Dialect,
    Inference,
    ParsesBodies,
    StreamingDialect,
)
from lego_rl.proxy import errors
from lego_rl.proxy.boundary import Normaliser, classify
from lego_rl.proxy.budgets import tentative
from lego_rl.proxy.errors import BadRequest, ProxyError
from lego_rl.proxy.fast.incremental_render import IncrementalRenderer
from lego_rl.proxy.fast.shared_tools import SharedTools
from lego_rl.proxy.parsing import json_object
from lego_rl.proxy.render import (
    PrefixCache,
    decode,
    render_text,
    tokenize_prompt,
)
from lego_rl.proxy.session import ProxySession, Thread
from lego_rl.proxy.stopstrings import StopScanner, cut_at_stop
from lego_rl.proxy.streaming import IncrementalDecoder
from lego_rl.proxy.toolcalls import (
    THINK_OPEN,
    CompletionParser,
    ParsedCompletion,
    collect,
    fresh_hex,
    parse_completion,
)
from lego_rl.token_ids import TokenIds

Reply = tuple[Any, ...]
"""What a call sends back: ("json", status, body) once, or ("start",), ("data", sse text)...,
("end",)."""


def eos_ids(tokenizer: Any) -> list[int]:
    """The tokenizer's eos id(s)."""
    eos = getattr(tokenizer, "eos_token_id", None)
    return [eos] if isinstance(eos, int) else list(eos or [])


def stop_ids(eos: list[int], sampling: Sampling) -> list[int]:
    """The session's stop ids plus the tokenizer's ``eos``, without duplicates."""
    return list(dict.fromkeys([*sampling.stop_token_ids, *eos]))


def effective_sampling(
    session: Sampling, requested: Sampling, *, room: int, stop: list[int]
) -> Sampling:
    """The session's distribution; a request may only lower max_tokens, add stop strings (and
    pick a seed when the session has none). ``room`` is what the context has left after the
    prompt."""
    max_tokens = min(session.max_tokens, room)
    if "max_tokens" in requested.model_fields_set:
        max_tokens = min(max_tokens, requested.max_tokens)
    seed = session.seed if session.seed is not None else requested.seed
    strings = list(dict.fromkeys([*session.stop, *requested.stop]))
    return session.model_copy(
        update={"max_tokens": max_tokens, "stop_token_ids": stop, "stop": strings, "seed": seed}
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


class ClientGone(Exception):
    """Raised in a backend's ``on_token`` to stop a generation whose client went away (for
    a backend that does not offer :class:`~lego_rl.kinds.AbortsGenerations`)."""


Body = dict[str, Any] | bytes
"""A request body: its bytes as received, or already read (an in-process caller)."""


def read_request(dialect: Dialect, body: Body, scope: str = "") -> ChatRequest:
    """The dialect's request for ``body``: from the bytes themselves where the dialect can
    (``parse_body(body, scope)``, which reads only what earlier requests of ``scope``, the
    session, did not have), else read as a JSON object and parsed. Raises ProxyError (400 for
    a body that is not a JSON object).

    The boundary of parsing: whatever a dialect raises while reading a body is the body's fault
    as far as the client is concerned, a 400 naming the exception (a harness retries a 5xx, and
    the same body would fail again), never a 500."""
    try:
        if isinstance(body, bytes):
            request = dialect.parse_body(body, scope) if isinstance(dialect, ParsesBodies) else None
            if request is not None:
                return request
            body = json_object(body)
        return dialect.parse(body)
    except ProxyError:
        raise
    except Exception as exc:  # noqa: BLE001 - see above: a body that cannot be read is a 400
        raise BadRequest(
            f"the request body could not be read ({type(exc).__name__}: {exc})"
        ) from exc


def system_prompt(request: ChatRequest) -> str:
    """The leading system messages: what identifies a conversation (main agent or sub-agent)."""
    parts = []
    for message in request.messages:
        if message.role != "system":
            break
        parts.append(message.content)
    return "\n".join(parts)


def to_completion(
    parsed: ParsedCompletion, gen: Generation, prompt_tokens: int, stop_sequence: str | None = None
) -> ChatCompletion:
    finish: Literal["length", "stop"] = "length" if gen.finish_reason == "length" else "stop"
    return ChatCompletion(
        content=parsed.content,
        reasoning=parsed.reasoning,
        tool_calls=parsed.tool_calls,
        finish_reason="tool_calls" if parsed.tool_calls else finish,
        stop_sequence=stop_sequence,
        prompt_tokens=prompt_tokens,
        completion_tokens=len(gen.completion_ids),
    )


@dataclass
class Call:
    """A call between preparation and its record: where it goes and what it sends."""

    session: ProxySession
    dialect: Dialect
    request: ChatRequest
    thread: Thread
    prompt_text: str
    record: CallRecord
    sampling: Sampling
    stop: list[int]
    id: str = field(default_factory=lambda: fresh_hex(32))
    stopped_by: str | None = None
    """The stop string that ended the reply, once generated."""
    abort: threading.Event = field(default_factory=threading.Event)
    """Set when the client has gone away: the generation stops, the call is recorded as cut."""

    @property
    def cut(self) -> bool:
        """Whether the client went away before its reply was sent whole."""
        return self.record.finish_reason == CLIENT_DISCONNECT

    @property
    def in_reasoning(self) -> bool:
        """Whether the prompt already opened the reasoning block."""
        return self.prompt_text.rstrip().endswith(THINK_OPEN)

    @property
    def reply_id(self) -> str:
        return f"{self.session.id}-{self.record.index}-{self.id}"


@dataclass
class CallHandler:
    """What every call needs from the server; ``serve`` answers one request body."""

    inference: Inference
    model_name: str
    max_context: int
    template: str | None = None
    on_call: Callable[[CallRecord], None] | None = None
    prefix_cache: PrefixCache | None = None
    renderer: IncrementalRenderer = field(init=False)
    eos: list[int] = field(init=False)
    """The tokenizer's eos ids (read once: transformers looks them up by name on each access)."""
    tools: SharedTools = field(default_factory=SharedTools)
    boundaries: Normaliser = field(init=False)

    def __post_init__(self) -> None:
        if self.prefix_cache is None:
            self.prefix_cache = PrefixCache(self.inference.tokenizer)
        self.renderer = IncrementalRenderer(self.inference.tokenizer, self.template)
        self.boundaries = Normaliser.of(self.inference.tokenizer)
        self.eos = eos_ids(self.inference.tokenizer)

    # -------------------------------------------------------------- entry points

    def serve(
        self,
        session: ProxySession,
        dialect: Dialect,
        body: Body,
        reply: Callable[[Reply], None],
        abort: threading.Event | None = None,
    ) -> None:
        """Answer one request through ``reply`` (see :data:`Reply`); never raises ProxyError.
        ``abort`` is set by the server when the client goes away."""
        try:
            call = self.prepare(session, dialect, body)
            if abort is not None:
                call.abort = abort
        except ProxyError as exc:
            session.reject(exc)
            reply(("json", exc.status, dialect.error(exc.status, exc.message, exc.kind)))
            return
        if call.request.stream:
            self._stream(call, reply)
        else:
            try:
                reply(("json", 200, self.complete(call)))
            except ProxyError as exc:
                reply(("json", exc.status, dialect.error(exc.status, exc.message, exc.kind)))
        with session.lock:  # off the reply's path: the next call finds it ready
            call.thread.settle()

    def handle(self, session: ProxySession, dialect: Dialect, body: Body) -> dict[str, Any]:
        """Answer a non-streaming request with its body; raises ProxyError."""
        return self.complete(self.prepare(session, dialect, body))

    def count_tokens(self, session: ProxySession, dialect: Dialect, body: Body) -> int:
        """Prompt tokens a request would take (no generation, nothing recorded)."""
        with tentative():
            request = read_request(dialect, body)
            text = render_text(self.inference.tokenizer, request, self.template)
            ids = tokenize_prompt(self.inference.tokenizer, text, None, self.prefix_cache).ids
        return len(ids)

    # -------------------------------------------------------------- stages

    def prepare(self, session: ProxySession, dialect: Dialect, body: Body) -> Call:
        """Parse and render; reserve the call's index in its thread. Raises ProxyError, and
        then leaves nothing in any cache (:func:`~lego_rl.proxy.budgets.tentative`)."""
        with tentative():
            return self._prepare(session, dialect, body)

    def _prepare(self, session: ProxySession, dialect: Dialect, body: Body) -> Call:
        request = read_request(dialect, body, session.id)
        request.model = request.model or self.model_name
        request.tools = self.tools.share(request.tools)
        if request.stream and not isinstance(dialect, StreamingDialect):
            raise BadRequest(
                f"dialect {dialect.name!r} cannot stream; send the request with stream: false",
                param="stream",
                kind=errors.UNSUPPORTED,
            )
        tokenizer = self.inference.tokenizer
        with session.lock:
            earlier = [t.rendering for t in session.threads]
        text, rendering = self.renderer.render(request, earlier)
        with session.lock:
            if session.max_calls is not None and session.started >= session.max_calls:
                session.limit_hit = True
                raise ProxyError(
                    400,
                    f"session {session.id} reached its limit of {session.max_calls} model calls",
                    errors.MAX_CALLS,
                )
            known = len(session.threads)
            thread = session.thread_for(text, system_prompt(request), request.model)
            previous = thread.context
            rendered = tokenize_prompt(tokenizer, text, previous, self.prefix_cache)
            room = self.max_context - len(rendered.ids)
            if room < 1:
                session.context_overflow = True
                session.refused(thread, opened=thread not in session.threads[:known])
                message = (
                    f"this model's maximum context length is {self.max_context} tokens; the "
                    f"prompt has {len(rendered.ids)} tokens, leaving no room for a completion"
                )
                session.errors.append(message)
                raise ProxyError(400, message, errors.CONTEXT_LENGTH, "messages")
            thread.rendering = rendering
            stop = stop_ids(self.eos, session.sampling)
            # Built without validation: the fields are typed here (ids are TokenIds), and
            # validating prompt ids would copy a sequence as long as the context on every call.
            record = CallRecord.model_construct(
                session=session.id,
                index=session.next_index,
                dialect=session.dialect,
                model=request.model,
                prompt_ids=rendered.ids,
                completion_ids=TokenIds(),
                logprobs=(),
                extends_previous=rendered.extends_previous,
                subagent=thread.subagent,
                started_at=time.time(),
                dropped_tools=request.dropped_tools,
            )
            if previous is not None and not rendered.extends_previous:
                boundary = classify(self.boundaries, previous, text, rendered.ids)
                record.boundary = boundary.kind
                record.boundary_tokens, record.boundary_sampled = boundary.tokens, boundary.sampled
            session.next_index += 1
            session.started += 1
        sampling = effective_sampling(session.sampling, request.sampling, room=room, stop=stop)
        return Call(session, dialect, request, thread, text, record, sampling, stop)

    def complete(self, call: Call) -> dict[str, Any]:
        """Generate, then answer in one body."""
        gen = self._generate(call, None)
        tokenizer = self.inference.tokenizer
        ids = list(gen.completion_ids)
        while ids and ids[-1] in call.stop:
            ids.pop()
        text = decode(tokenizer, ids)
        if call.stopped_by is not None and (at := text.find(call.stopped_by)) >= 0:
            text = text[:at]
        parsed = parse_completion(text, in_reasoning=call.in_reasoning, tools=call.request.tools)
        self._finish(call, gen, parsed.malformed)
        completion = to_completion(parsed, gen, len(call.record.prompt_ids), call.stopped_by)
        return call.dialect.format(call.request, completion, call.reply_id)

    def _stream(self, call: Call, reply: Callable[[Reply], None]) -> None:
        """Generate, sending each decided piece of the reply as the tokens arrive."""
        assert isinstance(call.dialect, StreamingDialect)  # prepare() refused the stream otherwise
        formatter = call.dialect.stream(call.request, call.reply_id)
        decoder = IncrementalDecoder(self.inference.tokenizer, call.stop)
        scanner = StopScanner(call.sampling.stop)
        parser = CompletionParser(in_reasoning=call.in_reasoning, tools=call.request.tools)
        parsed = ParsedCompletion(content="")
        streamed = 0
        broken: list[str] = []

        def send(events: list[Any]) -> None:
            collect(events, parsed)
            out = "".join(formatter.event(e) for e in events)
            if out:
                reply(("data", out))

        def on_token(token: int, logprob: float) -> None:
            nonlocal streamed
            streamed += 1
            if broken:
                return
            try:
                text = scanner.push(decoder.push(token))
                if text:
                    send(parser.feed(text))
            except Exception as exc:  # noqa: BLE001 - a formatting bug must not kill generation
                broken.append(f"{type(exc).__name__}: {exc}")

        reply(("start",))
        reply(("data", formatter.start(len(call.record.prompt_ids))))
        try:
            gen = self._generate(call, on_token)
        except ProxyError as exc:
            reply(("data", formatter.fail(exc.status, exc.message, exc.kind)))
            reply(("end",))
            return
        if call.cut:  # nobody is reading: nothing more to send
            self._finish(call, gen, 0)
            reply(("end",))
            return
        try:
            if broken:
                raise RuntimeError(broken[0])
            for token in gen.completion_ids[streamed:]:  # a backend that did not stream
                text = scanner.push(decoder.push(token))
                if text:
                    send(parser.feed(text))
            send(parser.feed(scanner.flush()) + parser.finish())
            self._finish(call, gen, parser.malformed)
            completion = to_completion(parsed, gen, len(call.record.prompt_ids), call.stopped_by)
            reply(("data", formatter.finish(completion)))
        except Exception as exc:  # noqa: BLE001 - the stream has started; end it with an error
            message = f"proxy failure: {type(exc).__name__}: {exc}"
            call.session.errors.append(message)
            reply(("data", formatter.fail(500, message, errors.SERVER_ERROR)))
        reply(("end",))

    def _generate(self, call: Call, on_token: Callable[[int, float], None] | None) -> Generation:
        """Generate without the session lock; the record is kept either way. Raises a
        ProxyError (500) when the backend fails."""
        session, record = call.session, call.record
        gen: Generation | None = None
        prompt = record.prompt_ids  # immutable: no copy (a copy is a list the collector walks)
        try:
            gen = self._sample(call, prompt, on_token)
            check_generation(gen, call.sampling.max_tokens)
            gen, call.stopped_by = cut_at_stop(self.inference.tokenizer, gen, call.sampling.stop, call.stop)
        except Exception as exc:  # noqa: BLE001 - any backend failure is recorded, then a 500
            gen = None
            record.error = f"{type(exc).__name__}: {exc}"
        else:
            record.completion_ids = TokenIds(gen.completion_ids)
            record.logprobs = tuple(gen.logprobs)
            record.routing = gen.routing
            record.prompt_routing = gen.prompt_routing
            record.finish_reason = gen.finish_reason
            record.policy_version = gen.policy_version
            if call.abort.is_set():
                record.finish_reason = CLIENT_DISCONNECT
        record.ended_at = time.time()
        cut = record.finish_reason == CLIENT_DISCONNECT
        with session.lock:
            session.started -= 1 if gen is None or cut else 0
            session.calls.append(record)
            call.thread.calls.append(record)
            if gen is None:
                session.errors.append(f"call {record.index}: {record.error}")
            elif not cut:  # the harness never saw a cut reply: the next call cannot extend it
                call.thread.leave(self.inference.tokenizer, record, call.prompt_text)
        if gen is None:
            self._notify(session, record)
            raise ProxyError(500, f"inference backend failed: {record.error}", errors.SERVER_ERROR)
        return gen

    def _sample(
        self, call: Call, prompt: Any, on_token: Callable[[int, float], None] | None
    ) -> Generation:
        """The backend's generation, stopped when ``call.abort`` is set: by the backend where it
        :class:`AbortsGenerations`; else at the next streamed token (its ``on_token`` raises
        :class:`ClientGone`), or not at all for a plain call."""
        inference, sampling = self.inference, call.sampling
        if isinstance(inference, AbortsGenerations):
            return inference.generate_abortable(prompt, sampling, call.abort, on_token)
        if call.abort.is_set():
            return Generation(
                completion_ids=[], logprobs=[], finish_reason=ABORTED,
                policy_version=inference.policy_version,
            )  # fmt: skip
        if on_token is None:  # backends older than on_token still serve plain calls
            return inference.generate(prompt, sampling)
        ids: list[int] = []
        logprobs: list[float] = []

        def watched(token: int, logprob: float) -> None:
            if call.abort.is_set():
                raise ClientGone
            ids.append(token)
            logprobs.append(logprob)
            on_token(token, logprob)

        try:
            return inference.generate(prompt, sampling, on_token=watched)
        except ClientGone:
            return Generation(
                completion_ids=ids, logprobs=logprobs, finish_reason=ABORTED,
                policy_version=inference.policy_version,
            )  # fmt: skip

    def _finish(self, call: Call, gen: Generation, malformed: int) -> None:
        if malformed:
            call.session.malformed[call.record.index] = malformed
        self._notify(call.session, call.record)

    def _notify(self, session: ProxySession, record: CallRecord) -> None:
        if self.on_call is None:
            return
        try:
            self.on_call(record)
        except Exception as exc:  # noqa: BLE001 - an observer must not fail the harness's call
            session.errors.append(
                f"on_call failed for call {record.index}: {type(exc).__name__}: {exc}"
            )
