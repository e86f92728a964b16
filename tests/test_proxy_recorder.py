"""CallRecords -> Trajectory: extension, rewrite, retry rollback, alignment."""

from lego_rl.data import CallRecord, Trajectory
from lego_rl.proxy.recorder import assemble


def call(index, prompt, completion, *, error=None, routing=None, prompt_routing=None):
    return CallRecord(
        session="s",
        index=index,
        dialect="openai-chat",
        prompt_ids=prompt,
        completion_ids=completion,
        logprobs=[-(index + 1) - i / 10 for i in range(len(completion))],
        routing=routing,
        prompt_routing=prompt_routing,
        error=error,
    )


def assert_aligned(trajectory: Trajectory, calls: list[CallRecord]) -> None:
    """Every mask-1 position holds a sampled (id, logprob) of its call, in order."""
    by_index = {c.index: c for c in calls}
    for seg in trajectory.segments:
        assert len(seg.ids) == len(seg.loss_mask) == len(seg.logprobs) == len(seg.routing)
        sampled = [(i, lp) for i, m, lp in zip(seg.ids, seg.loss_mask, seg.logprobs) if m == 1]
        expected = [
            (i, lp)
            for c in seg.calls
            for i, lp in zip(by_index[c].completion_ids, by_index[c].logprobs)
        ]
        assert sampled == expected
        assert all(lp == 0.0 for m, lp in zip(seg.loss_mask, seg.logprobs) if m == 0)


def test_extension_appends_new_prompt_tokens_masked_out():
    calls = [call(0, [1, 2, 3], [10, 11]), call(1, [1, 2, 3, 10, 11, 4, 5], [12])]
    traj = assemble(calls, "s")
    [seg] = traj.segments
    assert seg.ids == [1, 2, 3, 10, 11, 4, 5, 12]
    assert seg.loss_mask == [0, 0, 0, 1, 1, 0, 0, 1]
    assert seg.calls == [0, 1]
    assert traj.trained_tokens == 3 and traj.rolled_back == []
    assert_aligned(traj, calls)


def test_rewritten_history_starts_a_new_segment():
    calls = [
        call(0, [1, 2, 3], [10, 11]),
        call(1, [1, 2, 3, 10, 11, 4], [12]),
        call(2, [1, 2, 3, 99, 4], [13, 14]),  # the assistant turn was edited
        call(3, [1, 2, 3, 99, 4, 13, 14, 5], [15]),
    ]
    traj = assemble(calls, "s")
    assert [s.calls for s in traj.segments] == [[0, 1], [2, 3]]
    assert traj.segments[1].ids == [1, 2, 3, 99, 4, 13, 14, 5, 15]
    assert traj.segments[1].loss_mask == [0, 0, 0, 0, 0, 1, 1, 0, 1]
    assert_aligned(traj, calls)


def test_prompt_shorter_than_segment_starts_a_new_segment():
    calls = [call(0, [1, 2, 3], [10, 11]), call(1, [1, 2], [12])]
    assert [s.calls for s in assemble(calls, "s").segments] == [[0], [1]]


def test_retry_rolls_back_the_previous_generation():
    calls = [
        call(0, [1, 2], [10]),
        call(1, [1, 2, 10, 3], [11, 12]),
        call(2, [1, 2, 10, 3], [13]),  # harness retried call 1
        call(3, [1, 2, 10, 3, 13, 4], [14]),
    ]
    traj = assemble(calls, "s")
    assert traj.rolled_back == [1]
    [seg] = traj.segments
    assert seg.calls == [0, 2, 3]
    assert seg.ids == [1, 2, 10, 3, 13, 4, 14]
    assert 11 not in seg.ids and 12 not in seg.ids
    assert_aligned(traj, calls)


def test_repeated_retries_keep_only_the_last():
    calls = [call(0, [1], [10]), call(1, [1], [11]), call(2, [1], [12])]
    traj = assemble(calls, "s")
    assert traj.rolled_back == [0, 1]
    assert [s.ids for s in traj.segments] == [[1, 12]]


def test_failed_calls_are_skipped():
    calls = [
        call(0, [1, 2], [10]),
        call(1, [1, 2, 10, 3], [], error="boom"),
        call(2, [1, 2, 10, 3], [11]),
    ]
    traj = assemble(calls, "s")
    assert traj.rolled_back == []
    assert [s.calls for s in traj.segments] == [[0, 2]]
    assert_aligned(traj, calls)


def test_routing_is_aligned_and_unknown_prompt_routing_is_none():
    r = lambda e: [[e, e + 1]]  # noqa: E731 - one layer, top-2
    calls = [
        call(0, [1, 2], [10, 11], routing=[r(0), r(1)], prompt_routing=[r(7), r(8)]),
        call(1, [1, 2, 10, 11, 3], [12], routing=[r(2)]),
    ]
    [seg] = assemble(calls, "s").segments
    assert seg.routing == [r(7), r(8), r(0), r(1), None, r(2)]


def test_empty_session_has_no_segments():
    traj = assemble([], "s", subagent=True)
    assert traj.segments == [] and traj.subagent and traj.session == "s"
