"""End to end: the official openai SDK against a running ProxyServer with a scripted backend."""

import json
import threading

import httpx
import openai
import pytest
from legorl_std.dialects.openai_chat import OpenAIChatDialect

from lego_rl.data import Sampling
from lego_rl.proxy.server import ProxyServer
from lego_rl.proxy.session import ProxySession
from lego_rl.testing.scripted_inference import ScriptedInference
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a command",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
            },
        },
    }
]
FIRST = (
    "<think>\nI should list the files.\n</think>\n\nLet me look.\n"
    '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>'
)
SESSION_SAMPLING = Sampling(temperature=0.7, top_p=0.9, top_k=20, max_tokens=300)


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_chat_tokenizer()


@pytest.fixture
def make_proxy(tokenizer):
    servers = []

    def make(replies, *, max_context=8192, max_calls=None, inference=None):
        inference = inference or ScriptedInference(tokenizer, replies)
        seen = []
        server = ProxyServer(
            inference,
            {"openai-chat": OpenAIChatDialect()},
            model_name="tiny-policy",
            max_context=max_context,
            on_call=seen.append,
        )
        server.start()
        servers.append(server)
        session = server.open_session(
            "trial-1", "openai-chat", sampling=SESSION_SAMPLING, max_calls=max_calls
        )
        client = openai.OpenAI(
            base_url=session.base_url(server.url) + "/v1",
            api_key=session.api_key,
            max_retries=0,
            timeout=20,
        )
        return server, session, client, inference, seen

    yield make
    for server in servers:
        server.stop()


def user_turn(text="List the files."):
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": text},
    ]


def test_two_turn_tool_conversation_is_one_token_exact_segment(make_proxy, tokenizer):
    server, session, client, inference, seen = make_proxy([FIRST, "Done."])
    messages = user_turn()
    first = client.chat.completions.create(
        model="tiny-policy",
        messages=messages,
        tools=TOOLS,
        max_tokens=100,
        temperature=0.0,
        top_p=0.5,
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me look."
    [call] = choice.message.tool_calls
    assert call.id.startswith("call_") and call.function.name == "bash"
    assert json.loads(call.function.arguments) == {"command": "ls -la"}
    assert first.model == "tiny-policy"
    assert first.usage.prompt_tokens == len(inference.prompts[0])
    assert first.usage.completion_tokens == len(tokenizer.encode(FIRST)) + 1  # + eos
    # The session's distribution is authoritative; the request may only lower max_tokens.
    sampled_with = inference.samplings[0]
    assert (sampled_with.temperature, sampled_with.top_p, sampled_with.top_k) == (
        0.7,
        0.9,
        20,
    )
    assert sampled_with.max_tokens == 100 and tokenizer.eos_token_id in sampled_with.stop_token_ids

    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "a.txt\nb.txt"},
    ]
    second = client.chat.completions.create(model="tiny-policy", messages=messages, tools=TOOLS)
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "Done." and not second.choices[0].message.tool_calls
    assert inference.samplings[1].max_tokens == 300

    c0, c1 = session.calls
    assert seen == [c0, c1]
    assert (
        (c0.index, c1.index) == (0, 1) and c0.dialect == "openai-chat" and c0.model == "tiny-policy"
    )
    assert not c0.extends_previous and c1.extends_previous
    assert (
        c1.prompt_ids[: len(c0.prompt_ids) + len(c0.completion_ids)]
        == c0.prompt_ids + c0.completion_ids
    )
    assert list(c1.prompt_ids) == inference.prompts[1]

    traj = session.trajectory()
    [seg] = traj.segments
    assert seg.calls == [0, 1] and traj.rolled_back == []
    assert seg.ids == [*c1.prompt_ids, *c1.completion_ids]
    sampled = [(i, lp) for i, m, lp in zip(seg.ids, seg.loss_mask, seg.logprobs) if m]
    assert sampled == list(zip(c0.completion_ids, c0.logprobs)) + list(
        zip(c1.completion_ids, c1.logprobs)
    )
    assert session.errors == []


def test_retried_call_is_rolled_back(make_proxy):
    server, session, client, inference, _ = make_proxy(["first try", "second try"])
    for _ in range(2):
        client.chat.completions.create(model="m", messages=user_turn())
    assert session.calls[0].prompt_ids == session.calls[1].prompt_ids
    traj = session.trajectory()
    assert traj.rolled_back == [0] and [s.calls for s in traj.segments] == [[1]]


def test_auth_unknown_session_and_bad_requests(make_proxy):
    server, session, client, _, _ = make_proxy([])
    wrong_key = openai.OpenAI(
        base_url=session.base_url(server.url) + "/v1", api_key="sk-wrong", max_retries=0
    )
    with pytest.raises(openai.AuthenticationError) as info:
        wrong_key.models.list()
    assert info.value.status_code == 401 and info.value.body["code"] == "invalid_api_key"
    nowhere = openai.OpenAI(
        base_url=server.url + "/s/nope/v1", api_key=session.api_key, max_retries=0
    )
    with pytest.raises(openai.AuthenticationError) as unknown:
        nowhere.chat.completions.create(model="m", messages=user_turn())
    assert unknown.value.body == info.value.body  # the session's existence is not told
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="m", messages=[])
    assert info.value.body["param"] is None and "messages" in info.value.body["message"]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=user_turn(), n=2)
    raw = httpx.post(
        session.base_url(server.url) + "/v1/chat/completions",
        content=b"{not json",
        headers={"x-api-key": session.api_key},
    )
    assert raw.status_code == 400 and raw.json()["error"]["type"] == "invalid_request_error"
    nan = httpx.post(
        session.base_url(server.url) + "/v1/chat/completions",
        content=b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": NaN}',
        headers={"x-api-key": session.api_key},
    )
    assert nan.status_code == 400 and "NaN is not a JSON value" in nan.json()["error"]["message"]
    assert [m.id for m in client.models.list()] == ["tiny-policy"]
    assert httpx.head(session.base_url(server.url) + "/").status_code == 200
    assert session.calls == [] and len(session.rejected) == 4


def test_context_overflow_generates_nothing(make_proxy):
    server, session, client, inference, _ = make_proxy(["never"], max_context=40)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="m", messages=user_turn("x" * 100))
    assert info.value.body["code"] == "context_length_exceeded"
    assert session.context_overflow and inference.prompts == [] and session.calls == []


def test_completion_room_is_capped_by_the_context(make_proxy):
    server, session, client, inference, _ = make_proxy(
        ["a much longer reply than fits"], max_context=80
    )
    reply = client.chat.completions.create(model="m", messages=user_turn())
    assert inference.samplings[0].max_tokens == 80 - len(inference.prompts[0])
    assert reply.choices[0].finish_reason == "length"


def test_max_calls_limit(make_proxy):
    server, session, client, _, _ = make_proxy(["one", "two"], max_calls=1)
    client.chat.completions.create(model="m", messages=user_turn())
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="m", messages=user_turn("again"))
    assert (
        info.value.body["code"] == "max_calls_exceeded"
        and session.limit_hit
        and len(session.calls) == 1
    )


def test_backend_failure_is_a_500_and_recorded(make_proxy):
    server, session, client, _, seen = make_proxy([RuntimeError("device lost"), "recovered"])
    with pytest.raises(openai.InternalServerError, match="device lost"):
        client.chat.completions.create(model="m", messages=user_turn())
    assert (
        session.calls[0].error == "RuntimeError: device lost" and "device lost" in session.errors[0]
    )
    reply = client.chat.completions.create(model="m", messages=user_turn())
    assert reply.choices[0].message.content == "recovered"
    assert len(seen) == 2 and [s.calls for s in session.trajectory().segments] == [[1]]


def test_closed_session_is_refused_and_keeps_records(make_proxy):
    server, session, client, _, _ = make_proxy(["hi"])
    client.chat.completions.create(model="m", messages=user_turn())
    closed = server.close_session(session.id)
    assert closed is session and len(closed.calls) == 1
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="m", messages=user_turn())


class GatedInference(ScriptedInference):
    """Blocks generation for prompts containing 'slow' until released."""

    def __init__(self, tokenizer):
        super().__init__(tokenizer, ["slow reply", "fast reply"])
        self.release = threading.Event()

    def generate(self, prompt_ids, sampling):
        if "slow" in self.tokenizer.decode(prompt_ids):
            assert self.release.wait(10)
            self.replies.sort(key=lambda r: r != "slow reply")
        else:
            self.replies.sort(key=lambda r: r != "fast reply")
        return super().generate(prompt_ids, sampling)


def test_a_long_generation_does_not_block_other_sessions(make_proxy, tokenizer):
    inference = GatedInference(tokenizer)
    server, slow, slow_client, _, _ = make_proxy([], inference=inference)
    fast = server.open_session("trial-2", "openai-chat", sampling=SESSION_SAMPLING)
    fast_client = openai.OpenAI(
        base_url=fast.base_url(server.url) + "/v1", api_key=fast.api_key, max_retries=0
    )
    results = {}
    worker = threading.Thread(
        target=lambda: results.update(
            slow=slow_client.chat.completions.create(model="m", messages=user_turn("slow"))
        )
    )
    worker.start()
    reply = fast_client.chat.completions.create(model="m", messages=user_turn("quick"), timeout=5)
    assert reply.choices[0].message.content == "fast reply" and "slow" not in results
    inference.release.set()
    worker.join(10)
    assert results["slow"].choices[0].message.content == "slow reply"


@pytest.mark.slow
def test_real_qwen3_template_keeps_turns_token_exact():
    """With the Qwen3 vocabulary (real BPE merges) and our qwen3 template, turn 2 extends turn 1."""
    embedded = pytest.importorskip("legorl_embedded.policy.tokenizer")
    from lego_rl.proxy.pipeline import CallHandler

    tokenizer = embedded.load_tokenizer("qwen3")
    inference = ScriptedInference(tokenizer, [FIRST, "Done."])
    handler = CallHandler(inference, "tiny-policy", 8192)
    session = ProxySession("q", "openai-chat", SESSION_SAMPLING)
    dialect = OpenAIChatDialect()
    messages = user_turn()
    reply = handler.handle(session, dialect, {"messages": messages, "tools": TOOLS})
    message = reply["choices"][0]["message"]
    assert (
        reply["choices"][0]["finish_reason"] == "tool_calls"
        and message["content"] == "Let me look."
    )
    messages += [
        message,
        {
            "role": "tool",
            "tool_call_id": message["tool_calls"][0]["id"],
            "content": "a.txt",
        },
    ]
    handler.handle(session, dialect, {"messages": messages, "tools": TOOLS})
    assert session.calls[0].completion_ids[-1] == tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert session.calls[1].extends_previous
    [seg] = session.trajectory().segments
    assert seg.calls == [0, 1] and seg.trained_tokens == sum(
        len(c.completion_ids) for c in session.calls
    )


def test_a_failing_on_call_observer_does_not_fail_the_call(tokenizer):
    from lego_rl.proxy.pipeline import CallHandler

    def broken(record):
        raise OSError("disk full")

    handler = CallHandler(ScriptedInference(tokenizer, ["hi"]), "m", 8192, on_call=broken)
    session = ProxySession("x", "openai-chat", SESSION_SAMPLING)
    body = {"messages": user_turn()}
    reply = handler.handle(session, OpenAIChatDialect(), body)
    assert reply["choices"][0]["message"]["content"] == "hi" and len(session.calls) == 1
    assert session.errors == ["on_call failed for call 0: OSError: disk full"]


def test_start_freezes_the_startup_heap_once_per_process(monkeypatch, tokenizer):
    """A full collection walking the imported libraries stalls every call in flight; the first
    started server moves them out of the collector's reach (unless told not to)."""
    import gc

    from lego_rl.proxy import server as server_module

    def started(**options):
        proxy = ProxyServer(
            ScriptedInference(tokenizer, ["hi"]),
            {"openai-chat": OpenAIChatDialect()},
            model_name="tiny-policy",
            **options,
        )
        proxy.start()
        proxy.stop()

    monkeypatch.setattr(server_module, "_heap_frozen", False)
    gc.unfreeze()
    started(freeze_heap=False)
    assert gc.get_freeze_count() == 0
    started()
    frozen = gc.get_freeze_count()
    assert frozen > 0 and server_module._heap_frozen
    started()  # later servers leave the frozen heap alone
    assert gc.get_freeze_count() <= frozen
