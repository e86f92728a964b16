"""A session through plain turns, a tool round trip, a compaction, a retry and a sub-agent."""

from legorl_std.dialects.openai_chat import OpenAIChatDialect

from lego_rl.data import Sampling
from lego_rl.proxy.pipeline import CallHandler
from lego_rl.proxy.session import ProxySession
from lego_rl.testing.scripted_inference import ScriptedInference
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
CALL = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'


def test_session_story_gives_the_expected_trajectories():
    tok = tiny_chat_tokenizer()
    replies = [
        "Hi.",
        CALL,
        "Two files.",
        "Summary: listed.",
        "retry me",
        "Again.",
        "Sub done.",
    ]
    handler = CallHandler(ScriptedInference(tok, replies), "policy", 8192)
    session = ProxySession("t", "openai-chat", Sampling(max_tokens=100), small_model="fast")
    dialect = OpenAIChatDialect()

    def ask(messages, model="policy"):
        body = {"model": model, "messages": messages, "tools": TOOLS}
        return handler.handle(session, dialect, body)["choices"][0]["message"]

    system = {"role": "system", "content": "You are an agent."}
    history = [system, {"role": "user", "content": "hello"}]
    history.append(ask(history))  # 0: plain turn
    history.append({"role": "user", "content": "list files"})
    message = ask(history)  # 1: tool call, extends
    history += [
        message,
        {
            "role": "tool",
            "tool_call_id": message["tool_calls"][0]["id"],
            "content": "a b",
        },
    ]
    history.append(ask(history))  # 2: tool result turn, extends
    # 3: compaction rewrites the history: a new segment of the main trajectory.
    compacted = [system, {"role": "user", "content": "Summary of before. Continue."}]
    compacted.append(ask(compacted))
    compacted.append({"role": "user", "content": "once more"})
    ask(compacted)  # 4: its generation is rolled back by the retry below
    compacted.append(ask(compacted))  # 5: same context re-sent
    # 6: a sub-agent (its own system prompt, the small model) is a separate trajectory.
    ask(
        [
            {"role": "system", "content": "You search code."},
            {"role": "user", "content": "find x"},
        ],
        "fast",
    )

    main, sub = session.trajectories()
    assert session.trajectory() == main and not main.subagent and sub.subagent
    assert [s.calls for s in main.segments] == [[0, 1, 2], [3, 5]]
    assert main.rolled_back == [4] and [s.calls for s in sub.segments] == [[6]]
    calls = {c.index: c for c in session.calls}
    for segment in main.segments + sub.segments:
        assert len(segment.ids) == len(segment.loss_mask) == len(segment.logprobs)
        trained = [i for i, m in enumerate(segment.loss_mask) if m]
        sampled = [t for c in segment.calls for t in calls[c].completion_ids]
        assert [segment.ids[i] for i in trained] == sampled
    assert calls[6].subagent and not calls[5].subagent
    main_metrics, sub_metrics = session.metrics()
    assert main_metrics | {"trained_tokens": 0} == {
        "subagent": 0.0,
        "segments": 2.0,
        "calls": 6.0,
        "failed_calls": 0.0,
        "trained_tokens": 0,
        "sampled_share": 1.0,
        "rewrites": 1.0,
        "rollbacks": 1.0,
        "malformed_tool_calls": 0.0,
        "trained_non_sampled": 0.0,
        "boundary_drifts": 0.0,  # the compaction is a rewrite, the retry a retry: no drift
        "boundary_drift_tokens": 0.0,
        "boundary_drift_sampled": 0.0,
    }
    assert [c.boundary for c in session.calls] == [None, None, None, "rewrite", None, "retry", None]
    assert main_metrics["trained_tokens"] == sum(
        len(calls[i].completion_ids) for i in (0, 1, 2, 3, 5)
    )
    assert sub_metrics["subagent"] == 1.0 and sub_metrics["sampled_share"] == 1.0


def test_malformed_tool_calls_are_counted():
    tok = tiny_chat_tokenizer()
    handler = CallHandler(ScriptedInference(tok, ["<tool_call>\nnope\n</tool_call>"]), "p", 8192)
    session = ProxySession("t", "openai-chat", Sampling(max_tokens=100))
    reply = handler.handle(
        session, OpenAIChatDialect(), {"messages": [{"role": "user", "content": "x"}]}
    )
    assert reply["choices"][0]["message"]["content"] == "<tool_call>\nnope\n</tool_call>"
    assert session.malformed == {0: 1} and session.metrics()[0]["malformed_tool_calls"] == 1.0
