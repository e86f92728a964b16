"""A recorded trajectory as one verl sample: prompt / response split, masks, log-probs, routing.

Only recorded tokens are used, cut at positions, never re-tokenized. verl 0.9.1's legacy
trainer takes one sequence per sample (``AgentLoopWorker._run_agent_loop`` handles a single
AgentLoopOutput), so there a trajectory of several segments (the harness rewrote its history)
contributes one segment, chosen by ``choose``; the others are counted in
``untrained_tokens``, not trained. verl's v1 trainer takes a list of outputs per sample
(``AgentLoopWorkerTQ._agent_loop_postprocess``): ``choose="all"`` makes each segment a sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from lego_rl.data import Segment, Trajectory


@dataclass
class Sample:
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float]
    routed_experts: np.ndarray | None
    """``(len(prompt_ids) + len(response_ids), layers, k)`` int; zero rows where unknown."""
    stats: dict[str, int] = field(default_factory=dict)


def pick_segment(trajectory: Trajectory | None, choose: Literal["last", "most-trained"]) -> Segment | None:
    segments = [s for s in (trajectory.segments if trajectory else []) if s.ids]
    if not segments:
        return None
    if choose == "most-trained":
        return max(reversed(segments), key=lambda s: s.trained_tokens)
    return segments[-1]


def split_point(segment: Segment, prompt_length: int, response_length: int) -> int:
    """Where the response starts: at the first sampled token, moved so that both sides fit
    their widths (sampled tokens moved into the prompt are not trained)."""
    first = next((i for i, m in enumerate(segment.loss_mask) if m), len(segment.ids))
    return min(prompt_length, max(first, len(segment.ids) - response_length))


Choice = Literal["last", "most-trained", "all"]
"""Which segments of a trajectory become samples: one (the last, or the one with the most
trained tokens), or every one of them (verl's v1 list of outputs per sample)."""


def to_samples(
    trajectory: Trajectory | None,
    *,
    prompt_length: int,
    response_length: int,
    pad_id: int,
    routing_shape: tuple[int, int] | None = None,
    choose: Choice = "last",
    train: bool = True,
) -> list[Sample]:
    """The verl samples of a trial, in segment order. ``routing_shape`` (layers, k): emit a
    routing table (zero rows where a token's routing is unknown); None: no routing.
    ``train=False`` masks every token (a trial that failed through the infrastructure). A trial
    that generated nothing is one masked token (verl's shapes stay valid)."""
    if choose == "all":
        segments: list[Segment | None] = [s for s in (trajectory.segments if trajectory else []) if s.ids]
    else:
        segments = [pick_segment(trajectory, choose)]
    empty = Segment(ids=[pad_id], loss_mask=[0], logprobs=[0.0], routing=[None])
    samples = [
        _sample(segment or empty, prompt_length, response_length, routing_shape, train)
        for segment in segments or [None]
    ]
    trained = sum(sum(sample.response_mask) for sample in samples)
    left = (trajectory.trained_tokens if trajectory else 0) - trained
    for sample in samples:
        sample.stats["segments"] = len(trajectory.segments) if trajectory else 0
        sample.stats["untrained_tokens"] = left
    return samples


def to_sample(trajectory: Trajectory | None, *, choose: Literal["last", "most-trained"] = "last", **kw: Any) -> Sample:
    """The one verl sample of a trial (see :func:`to_samples`)."""
    (sample,) = to_samples(trajectory, choose=choose, **kw)
    return sample


def _sample(
    segment: Segment, prompt_length: int, response_length: int, routing_shape: tuple[int, int] | None, train: bool
) -> Sample:
    cut = split_point(segment, prompt_length, response_length)
    end = min(len(segment.ids), cut + response_length)
    if cut == end:  # an all-prompt segment: verl needs one response position
        cut = max(0, end - 1)
    mask = segment.loss_mask[cut:end] if train else [0] * (end - cut)
    sample = Sample(
        prompt_ids=segment.ids[:cut],
        response_ids=segment.ids[cut:end],
        response_mask=list(mask),
        response_logprobs=list(segment.logprobs[cut:end]),
        routed_experts=_routing(segment, end, routing_shape),
    )
    sample.stats = {
        "trained_tokens": sum(sample.response_mask),
        "routed_tokens": int(sum(1 for r in segment.routing[:end] if r)),
    }
    return sample


def _routing(segment: Segment, end: int, shape: tuple[int, int] | None) -> np.ndarray | None:
    if shape is None:
        return None
    table = np.zeros((end, *shape), dtype=np.int16)
    for i, routing in enumerate(segment.routing[:end]):
        if not routing:
            continue
        row = np.asarray(routing, dtype=np.int16)
        if row.shape != shape:
            raise ValueError(
                f"recorded routing of token {i} has (layers, k) {row.shape}, expected {shape}"
            )
        table[i] = row
    return table


def routing_shape(trajectory: Trajectory | None) -> tuple[int, int] | None:
    """(layers, k) of the first token with recorded routing, if any."""
    for segment in trajectory.segments if trajectory else []:
        for routing in segment.routing:
            if routing:
                return len(routing), len(routing[0])
    return None
