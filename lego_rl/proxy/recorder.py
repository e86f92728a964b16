"""Assemble a session's CallRecords into a token-exact Trajectory of Segments.

Pure functions, no server. Rules (DESIGN.md, "Data model"):

- failed calls (``error`` set) carry no generation and are skipped;
- a call cut by its client (``finish_reason`` ``client_disconnect``: the harness never read its
  reply whole) is rolled back at once (listed in ``Trajectory.rolled_back``, not trained);
- a call with the same prompt ids as the previous kept call is a retry: the previous
  generation is rolled back (listed in ``Trajectory.rolled_back``, not trained);
- a call whose prompt starts with the current segment's ids is appended to it: the new
  prompt tokens get mask 0, the completion mask 1 with its sampled log-probs and routing;
- any other call (a rewritten history) starts a new segment.
"""

from __future__ import annotations

from collections.abc import Sequence

from lego_rl.data import CLIENT_DISCONNECT, CallRecord, Routing, Segment, Trajectory
from lego_rl.proxy.boundary import DRIFTS


def kept_calls(calls: Sequence[CallRecord]) -> tuple[list[CallRecord], list[int]]:
    """(calls that count, indices of rolled-back calls), in call order."""
    kept: list[CallRecord] = []
    rolled_back: list[int] = []
    for call in calls:
        if call.error is not None:
            continue
        if call.finish_reason == CLIENT_DISCONNECT:
            rolled_back.append(call.index)
            continue
        if kept and kept[-1].prompt_ids == call.prompt_ids:
            rolled_back.append(kept.pop().index)
        kept.append(call)
    return kept, rolled_back


def _routing_at(routing: list[Routing] | None, start: int, stop: int) -> list[Routing | None]:
    if routing is None or len(routing) < stop:
        return [None] * (stop - start)
    return list(routing[start:stop])


def append_call(segment: Segment, call: CallRecord) -> None:
    """Append the part of ``call.prompt_ids`` past ``segment`` (mask 0), then its completion."""
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


def extends(segment: Segment, prompt_ids: Sequence[int]) -> bool:
    n = len(segment.ids)
    return 0 < n <= len(prompt_ids) and list(prompt_ids[:n]) == segment.ids


def assemble(calls: Sequence[CallRecord], session: str, *, subagent: bool = False) -> Trajectory:
    """The trajectory of one session from its calls (in call order)."""
    kept, rolled_back = kept_calls(calls)
    segments: list[Segment] = []
    for call in kept:
        if not segments or not extends(segments[-1], call.prompt_ids):
            segments.append(Segment())
        append_call(segments[-1], call)
    return Trajectory(
        session=session, segments=segments, subagent=subagent, rolled_back=rolled_back
    )


def sampled_positions(segment: Segment, calls: dict[int, CallRecord]) -> int:
    """Trained positions of ``segment`` whose id and log-prob are exactly what a call sampled."""
    count = 0
    for index in segment.calls:
        call = calls[index]
        start = len(call.prompt_ids)
        for offset, (token, logprob) in enumerate(
            zip(call.completion_ids, call.logprobs, strict=True)
        ):
            at = start + offset
            if (
                at < len(segment.ids)
                and segment.loss_mask[at] == 1
                and segment.ids[at] == token
                and segment.logprobs[at] == logprob
            ):
                count += 1
    return count


def trajectory_metrics(
    trajectory: Trajectory, calls: Sequence[CallRecord], *, malformed: int = 0
) -> dict[str, float]:
    """Health of one trajectory. ``sampled_share`` must be 1.0 and ``trained_non_sampled`` 0:
    every trained token is one the backend sampled, with its log-prob. ``rewrites`` counts calls
    that started a new segment; ``boundary_drifts`` those among them whose history was the same
    conversation re-rendered differently at a turn boundary (:mod:`lego_rl.proxy.boundary`),
    ``boundary_drift_tokens`` the context tokens those did not reproduce (``..._sampled``: of
    them, sampled ones)."""
    by_index = {c.index: c for c in calls}
    trained = trajectory.trained_tokens
    sampled = sum(sampled_positions(s, by_index) for s in trajectory.segments)
    drifts = [c for c in calls if c.boundary in DRIFTS]
    return {
        "subagent": float(trajectory.subagent),
        "segments": float(len(trajectory.segments)),
        "calls": float(len(calls)),
        "failed_calls": float(sum(1 for c in calls if c.error is not None)),
        "trained_tokens": float(trained),
        "sampled_share": sampled / trained if trained else 1.0,
        "trained_non_sampled": float(trained - sampled),
        "rewrites": float(max(0, len(trajectory.segments) - 1)),
        "rollbacks": float(len(trajectory.rolled_back)),
        "malformed_tool_calls": float(malformed),
        "boundary_drifts": float(len(drifts)),
        "boundary_drift_tokens": float(sum(c.boundary_tokens for c in drifts)),
        "boundary_drift_sampled": float(sum(c.boundary_sampled for c in drifts)),
    }
