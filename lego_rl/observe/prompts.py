"""A call's tokens as the run store keeps them: the prompt as a reference to an earlier call's
context plus the ids it appends, then the completion; and a trajectory as the calls it was
assembled from, so that each token is kept once.

An agent's prompt is its whole conversation, so call n's prompt starts with call n-1's prompt
and completion: stored whole, a trial's calls cost the square of its length. The store keeps
``base`` (an earlier call of the session), ``keep`` (how many ids of that call's prompt +
completion this prompt starts with) and the ids after them; the prompt's routing likewise,
where its routing over those ``keep`` positions is exactly the earlier call's (a backend that
routes the same tokens the same way; otherwise the whole prompt routing is kept).

A trajectory the proxy's recorder assembled from the trial's calls is stored as the list of
its segments' calls, checked when written: assembling the stored calls again must give the
same ids, mask, log-probs and routing (else it is stored whole, :mod:`lego_rl.observe.codec`).
"""

from __future__ import annotations

import zlib
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from lego_rl.data import CallRecord, Routing, Segment, Trajectory
from lego_rl.observe.codec import (
    BlobError,
    floats,
    ints,
    pack,
    pack_routing,
    unpack,
    unpack_routing,
)
from lego_rl.token_ids import TokenIds, common_prefix

TOKEN_FIELDS = frozenset({"prompt_ids", "completion_ids", "logprobs", "routing", "prompt_routing"})
"""What a call's blob holds; the rest of the record is kept as JSON."""
PER_SESSION = 4
"""Earlier calls of a session a prompt is compared with (a main agent and its sub-agents)."""
SESSIONS = 1024
"""Sessions remembered at once (a trial's session is forgotten at its trial_end)."""


def light_record(record: CallRecord) -> dict[str, Any]:
    """The record without its token arrays, with their sizes."""
    light = record.model_dump(mode="json", exclude=set(TOKEN_FIELDS))
    light["prompt_tokens"] = len(record.prompt_ids)
    light["completion_tokens"] = len(record.completion_ids)
    return light


@dataclass(frozen=True)
class Context:
    """What a later prompt of the session may start with: a call's prompt + completion."""

    index: int
    ids: TokenIds
    routing: list[Routing | None] | None


def context_of(index: int, prompt: TokenIds, completion: TokenIds,
               prompt_routing: Sequence[Routing | None] | None,
               routing: Sequence[Routing | None] | None) -> Context:  # fmt: skip
    route: list[Routing | None] | None = None
    if prompt_routing is not None:
        route = list(prompt_routing)
        if routing is not None and len(prompt_routing) == len(prompt):
            route.extend(routing)
    return Context(index, prompt + completion, route)


class Contexts:
    """The writer's memory of each live session's last calls."""

    def __init__(self) -> None:
        self._sessions: OrderedDict[str, list[Context]] = OrderedDict()

    def add(self, record: CallRecord, prompt: TokenIds) -> None:
        calls = self._sessions.setdefault(record.session, [])
        self._sessions.move_to_end(record.session)
        completion = TokenIds.of(record.completion_ids)
        calls.append(context_of(record.index, prompt, completion, record.prompt_routing,
                                record.routing))  # fmt: skip
        del calls[:-PER_SESSION]
        while len(self._sessions) > SESSIONS:
            self._sessions.popitem(last=False)

    def forget(self, session: str) -> None:
        self._sessions.pop(session, None)

    def base(self, session: str, prompt: TokenIds) -> tuple[Context | None, int]:
        """The earlier call whose context this prompt shares most with, and how much."""
        best, keep = None, 0
        for context in reversed(self._sessions.get(session, [])):
            shared = (
                len(context.ids) if prompt.startswith(context.ids)
                else common_prefix(prompt, context.ids)
            )  # fmt: skip
            if shared > keep:
                best, keep = context, shared
        return best, keep


def call_payload(
    record: CallRecord, contexts: Contexts | None, *, prompt_known: bool = True
) -> bytes:
    """The token arrays of ``record`` (its prompt relative to ``contexts``), uncompressed."""
    prompt = TokenIds.of(record.prompt_ids)
    base, keep = contexts.base(record.session, prompt) if contexts and prompt_known else (None, 0)
    route_keep = 0
    if base is not None and record.prompt_routing is not None and base.routing is not None:
        if len(base.routing) >= keep and len(record.prompt_routing) >= keep:
            same = list(record.prompt_routing[:keep]) == base.routing[:keep]
            route_keep = keep if same else 0
    prompt_route, prompt_columns = pack_routing(
        None if record.prompt_routing is None else record.prompt_routing[route_keep:]
    )
    route, route_columns = pack_routing(record.routing)
    header = {
        "prompt": prompt_known,
        "base": base.index if base is not None else None,
        "keep": keep,
        "route_keep": route_keep,
        "prompt_routing": prompt_route,
        "routing": route,
    }
    columns = {
        "prompt": ints(prompt[keep:] if prompt_known else [], "i"),
        "completion": ints(record.completion_ids, "i"),
        "logprobs": floats(record.logprobs),
        **{f"p.{k}": v for k, v in prompt_columns.items()},
        **{f"c.{k}": v for k, v in route_columns.items()},
    }
    if contexts is not None and prompt_known:
        contexts.add(record, prompt)
    return pack(header, columns)


class CallDecoder:
    """Decodes one session's call payloads in the order they were written (a base is always
    written before the calls that refer to it)."""

    def __init__(self) -> None:
        self._contexts: dict[int, Context] = {}

    def record(self, light: dict[str, Any], payload: bytes) -> CallRecord:
        header, columns = unpack(payload)
        prompt = TokenIds(columns["prompt"])
        prompt_routing = unpack_routing(header["prompt_routing"], columns, "p.")
        if header["base"] is not None:
            base = self._contexts.get(header["base"])
            if base is None:
                raise KeyError(f"call {light.get('index')} refers to call {header['base']}, "
                               "which this session's store does not hold")  # fmt: skip
            prompt = base.ids[: header["keep"]] + prompt
            if prompt_routing is not None and header["route_keep"]:
                prompt_routing = (base.routing or [])[: header["route_keep"]] + prompt_routing
        fields = {k: v for k, v in light.items() if k not in ("prompt_tokens", "completion_tokens")}
        # A call's routing was packed from a CallRecord's, which has no unknown (None) token;
        # CallRecord validates that again here.
        record = CallRecord(
            **fields,
            prompt_ids=prompt,
            completion_ids=TokenIds(columns["completion"]),
            logprobs=tuple(columns["logprobs"].tolist()),
            routing=cast("list[Routing] | None", unpack_routing(header["routing"], columns, "c.")),
            prompt_routing=cast("list[Routing] | None", prompt_routing),
        )
        if header["prompt"]:
            self._contexts[record.index] = context_of(
                record.index, prompt, record.completion_ids, prompt_routing, record.routing
            )
        return record

    def records(self, rows: Iterable[tuple[dict[str, Any], bytes]]) -> list[CallRecord]:
        return [self.record(light, payload) for light, payload in rows]


# ------------------------------------------------------------- trajectories made of calls


def _routing_at(routing: Sequence[Routing] | None, start: int, stop: int) -> list[Routing | None]:
    if routing is None or len(routing) < stop:
        return [None] * (stop - start)
    return list(routing[start:stop])


def append_call(segment: Segment, call: CallRecord) -> None:
    """The proxy recorder's rule (``lego_rl.proxy.recorder.append_call``), kept here as the
    format's own so that a stored trajectory reads the same whatever the recorder does later:
    the prompt past the segment (mask 0, its routing), then the completion (mask 1, its
    log-probs and routing)."""
    start, stop = len(segment.ids), len(call.prompt_ids)
    segment.ids.extend(call.prompt_ids[start:])
    segment.loss_mask.extend([0] * (stop - start))
    segment.logprobs.extend([0.0] * (stop - start))
    segment.routing.extend(_routing_at(call.prompt_routing, start, stop))
    n = len(call.completion_ids)
    segment.ids.extend(call.completion_ids)
    segment.loss_mask.extend([1] * n)
    segment.logprobs.extend(call.logprobs)
    segment.routing.extend(_routing_at(call.routing, 0, n))
    segment.calls.append(call.index)


def rebuild(header: dict[str, Any], records: dict[int, CallRecord]) -> Trajectory:
    """The trajectory ``header`` names (its segments' calls) assembled from the session's
    calls by :func:`append_call`."""
    segments = []
    for calls in header["segments"]:
        segment = Segment()
        for index in calls:
            if index not in records:
                raise KeyError(f"the trajectory's call {index} is not in the store")
            append_call(segment, records[index])
        segments.append(segment)
    return Trajectory(session=header["session"], segments=segments,
                      subagent=header["subagent"], rolled_back=header["rolled_back"])  # fmt: skip


def digest(trajectory: Trajectory) -> int:
    """A checksum of a trajectory's ids, mask, log-probs and calls (not its routing)."""
    crc = 0
    for s in trajectory.segments:
        for column in (array("q", s.ids), array("q", s.loss_mask), array("d", s.logprobs),
                       array("q", s.calls)):  # fmt: skip
            crc = zlib.crc32(column.tobytes(), crc)
    return crc


def by_reference(trajectory: Trajectory, records: dict[int, CallRecord]) -> bytes | None:
    """The payload of ``trajectory`` as a reference to its calls (their ids, log-probs and
    routing are stored once, with the calls) when assembling them gives exactly it; None when
    it does not (a trajectory made otherwise, calls not all known)."""
    header = {
        "ref": "calls",
        "session": trajectory.session,
        "subagent": trajectory.subagent,
        "rolled_back": trajectory.rolled_back,
        "segments": [s.calls for s in trajectory.segments],
    }
    try:
        same = rebuild(header, records) == trajectory
    except (KeyError, ValueError, TypeError):
        return None
    return pack({**header, "crc": digest(trajectory)}, {}) if same else None


def from_reference(header: dict[str, Any], records: dict[int, CallRecord]) -> Trajectory:
    trajectory = rebuild(header, records)
    if digest(trajectory) != header["crc"]:
        raise BlobError(f"trajectory {header['session']}: its calls in the store changed since")
    return trajectory
