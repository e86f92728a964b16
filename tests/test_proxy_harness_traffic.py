"""Recorded Claude Code, Codex and mini-swe-agent traffic replayed through the proxy.

``fixtures/harness-traffic.json`` holds what the unmodified CLIs sent through a real proxy
while solving the kit's fix-add task (``fixtures/record_harness_traffic.py`` writes it; long
strings cut). Replayed without the binaries: every real request shape parses, each call after
the first extends the one before token for token (the harness's echo of the proxy's reply is
recognised), and the trajectory trains exactly the sampled tokens."""

from __future__ import annotations

import pytest
from harness_traffic import RECORDED, replayed


@pytest.mark.parametrize("recorded", RECORDED, ids=[r["harness"] for r in RECORDED])
def test_recorded_requests_replay_as_one_token_exact_segment(recorded):
    with replayed(recorded) as session:
        calls = session.calls
        assert [c.error for c in calls] == [None] * len(recorded["requests"])
        assert [c.extends_previous for c in calls] == [False] + [True] * (len(calls) - 1)
        assert [c.boundary for c in calls] == [None] * len(calls)
        (trajectory,) = session.trajectories()
        assert len(trajectory.segments) == 1 and not trajectory.rolled_back
        assert trajectory.trained_tokens == sum(len(c.completion_ids) for c in calls)
        assert session.metrics()[0]["sampled_share"] == 1.0
        assert not session.rejected and not session.malformed
