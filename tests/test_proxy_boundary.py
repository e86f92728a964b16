"""Token boundaries between calls: a history re-rendered differently from what was sampled is
detected, classified and counted, costs only a new segment, and a trajectory that would train a
token the backend did not sample is never trained (the trial is our defect)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from harness_traffic import RECORDED, replayed
from legorl_embedded.policy.tokenizer import load_tokenizer

from lego_rl.data import Attribution, CallRecord, Termination, TrialResult
from lego_rl.engine.metrics import token_boundary
from lego_rl.engine.trial import non_sampled
from lego_rl.kinds import ChatMessage, ChatRequest
from lego_rl.proxy.boundary import Normaliser, classify
from lego_rl.proxy.recorder import assemble, trajectory_metrics
from lego_rl.proxy.render import Context, encode, render_prompt

THINKING = "<think>\nThe bug is in calc.py: it subtracts.\n</think>\n\n"


@pytest.fixture(scope="module")
def qwen3():
    return load_tokenizer()


def _first_turn(tok, completion_text: str):
    """The context a first Qwen3 call left: a rendered user turn and a sampled reply."""
    first = render_prompt(tok, ChatRequest(messages=[ChatMessage("user", "fix calc.py")]))
    completion = encode(tok, completion_text)
    record = CallRecord(
        session="s", index=0, dialect="openai-chat", prompt_ids=first.ids,
        completion_ids=completion, logprobs=[-0.5] * len(completion),
    )  # fmt: skip
    return Context.of(tok, record, first.text)


def _next(tok, previous: Context, *messages: ChatMessage):
    request = ChatRequest(messages=[ChatMessage("user", "fix calc.py"), *messages])
    rendered = render_prompt(tok, request, previous)
    return rendered, classify(Normaliser.of(tok), previous, rendered.text, rendered.ids)


def test_an_echo_without_the_thinking_is_named(qwen3):
    previous = _first_turn(qwen3, THINKING + "Fixed.<|im_end|>")
    reasoning = THINKING.removeprefix("<think>").removesuffix("</think>\n\n").strip()
    kept = ChatMessage("assistant", "Fixed.", reasoning=reasoning)
    rendered, _ = _next(qwen3, previous, kept, ChatMessage("user", "now run the tests"))
    assert rendered.extends_previous  # the policy's template keeps an echoed thinking
    dropped = ChatMessage("assistant", "Fixed.")
    rendered, boundary = _next(qwen3, previous, dropped, ChatMessage("user", "now run the tests"))
    assert not rendered.extends_previous and THINKING not in rendered.text
    assert (boundary.kind, boundary.drift) == ("thinking", True)
    # The new prompt keeps the old prompt's ids and loses the whole sampled reply from "<think>".
    assert boundary.tokens == boundary.sampled == len(previous.completion_ids)


def test_a_trimmed_echo_is_whitespace_and_an_edited_history_is_a_rewrite(qwen3):
    previous = _first_turn(qwen3, "Fixed.\n\n<|im_end|>")
    trimmed = ChatMessage("assistant", "Fixed.")
    _, boundary = _next(qwen3, previous, trimmed, ChatMessage("user", "thanks"))
    assert boundary.kind == "whitespace" and 0 < boundary.sampled <= boundary.tokens
    _, boundary = _next(qwen3, previous, ChatMessage("assistant", "Fixed it."), ChatMessage("user", "thanks"))
    assert (boundary.kind, boundary.drift) == ("rewrite", False)


def test_a_dropped_special_token_and_a_retry(qwen3):
    normaliser = Normaliser.of(qwen3)
    previous = _first_turn(qwen3, "Fixed.<|im_end|>")
    text = previous.prompt_text + "Fixed.\n<|im_start|>user\nthanks<|im_end|>\n<|im_start|>assistant\n"
    ids = previous.prompt_ids + encode(qwen3, text[len(previous.prompt_text) :])
    assert classify(normaliser, previous, text, ids).kind == "special_token"
    retry = classify(normaliser, previous, previous.prompt_text, previous.prompt_ids)
    assert (retry.kind, retry.tokens, retry.sampled) == ("retry", len(previous.completion_ids), len(previous.completion_ids))


@pytest.mark.parametrize("recorded", RECORDED, ids=[r["harness"] for r in RECORDED])
def test_real_harness_traffic_that_drops_the_thinking_is_detected_and_trains_only_sampled_tokens(recorded):
    """The harnesses' own requests echo the policy's replies without their thinking (as Claude
    Code, Codex and mini-swe-agent sent them): each call after the first re-renders the history
    differently from what was sampled. Every drift is counted and named, each starts a new
    segment, and every trained token is one the backend sampled."""
    replies = [THINKING + reply for reply in recorded["replies"]]
    with replayed(recorded, replies) as session:
        calls = session.calls
        assert [c.boundary for c in calls] == [None] + ["thinking"] * (len(calls) - 1)
        # What each later prompt lost is exactly the previous call's whole sampled reply.
        assert [c.boundary_sampled for c in calls[1:]] == [len(c.completion_ids) for c in calls[:-1]]
        (trajectory,) = session.trajectories()
        assert [s.calls for s in trajectory.segments] == [[c.index] for c in calls]
        (metrics,) = session.metrics()
        assert metrics["boundary_drifts"] == len(calls) - 1
        assert metrics["boundary_drift_sampled"] == sum(len(c.completion_ids) for c in calls[:-1])
        assert metrics["sampled_share"] == 1.0 and metrics["trained_non_sampled"] == 0.0
        assert trajectory.trained_tokens == sum(len(c.completion_ids) for c in calls)


def _calls():
    return [
        CallRecord(session="s", index=0, dialect="d", prompt_ids=[1, 2], completion_ids=[3, 4], logprobs=[-1.0, -2.0]),
        CallRecord(session="s", index=1, dialect="d", prompt_ids=[1, 2, 3, 4, 5], completion_ids=[6], logprobs=[-0.5],
                   extends_previous=True),
    ]  # fmt: skip


def test_a_trained_token_that_was_not_sampled_is_counted():
    calls = _calls()
    trajectory = assemble(calls, "s")
    assert trajectory_metrics(trajectory, calls)["trained_non_sampled"] == 0.0
    trajectory.segments[0].ids[-1] = 7  # a bookkeeping bug: the last trained id is not what call 1 sampled
    metrics = trajectory_metrics(trajectory, calls)
    assert metrics["trained_non_sampled"] == 1.0 and metrics["sampled_share"] == 2 / 3


def test_a_trial_with_non_sampled_trained_tokens_is_ours_and_never_trained(monkeypatch):
    """Through the real trial runner: the session's assembly (patched here to corrupt one id,
    standing in for a bookkeeping bug) gives a trajectory whose trained ids are not all
    sampled; the trial ends internal_error (infrastructure) and no step counts its tokens."""
    from test_trial_runner import FakeHarness, FakeVerifier, runner

    import lego_rl.proxy.session as session_module
    from lego_rl.kinds import HarnessResult, Task, VerifierResult

    real = session_module.assemble

    def corrupted(calls, session, *, subagent=False):
        trajectory = real(calls, session, subagent=subagent)
        for segment in trajectory.segments:
            if 1 in segment.loss_mask:
                segment.ids[segment.loss_mask.index(1)] += 1
        return trajectory

    class Calling(FakeHarness):
        def run(self, sandbox, task, endpoint, timeout):
            response = httpx.post(
                endpoint.base_url + "/v1/chat/completions",
                json={"model": endpoint.model, "messages": [{"role": "user", "content": "hi"}]},
                headers={"authorization": f"Bearer {endpoint.api_key}"},
                timeout=30,
            )
            assert response.status_code == 200, response.text
            return self.outcome

    monkeypatch.setattr(session_module, "assemble", corrupted)
    run, setup = runner(Calling(HarnessResult(Termination.COMPLETED)), FakeVerifier(VerifierResult(1.0)))
    setup.proxy.handler.inference.replies = ["Done."]
    setup.proxy.start()
    try:
        result = run.run(Task(name="t", path=Path("/nonexistent"), instruction="fix it"), "trial-ns")
    finally:
        setup.proxy.stop()
    assert result.termination == Termination.INTERNAL_ERROR
    assert result.attribution == Attribution.INFRASTRUCTURE
    assert "not sampled" in result.reason and "main: 1 of" in result.reason
    assert token_boundary([[result]])["trained_non_sampled_tokens"] == 0.0


def test_step_metrics_count_drift_over_the_trials_trained():
    drifted = TrialResult(trial_id="a", task="t", fidelity=[{"boundary_drifts": 2.0, "boundary_drift_tokens": 30.0}])
    clean = TrialResult(trial_id="b", task="t", fidelity=[{"boundary_drifts": 0.0, "boundary_drift_tokens": 0.0}])
    broken = TrialResult(trial_id="c", task="t", fidelity=[{"trained_non_sampled": 4.0, "trained_tokens": 9.0}],
                         attribution=Attribution.INFRASTRUCTURE)  # fmt: skip
    metrics = token_boundary([[drifted, clean, broken]])
    assert metrics == {
        "boundary_drift_tokens_mean": 15.0,
        "boundary_drift_trial_share": 0.5,
        "trained_non_sampled_tokens": 0.0,
    }
    assert non_sampled(broken) == (
        "token bookkeeping: trained tokens that were not sampled (main: 4 of 9); the trial is not trained"
    )
    assert non_sampled(clean) is None
