"""Stop strings end the reply where the first appears: the official SDKs see the text before it,
the record keeps the sampled tokens up to the one that completed it."""

import anthropic
import openai
import pytest
from legorl_std.dialects.anthropic import AnthropicDialect
from legorl_std.dialects.openai_chat import OpenAIChatDialect

from lego_rl.data import Generation
from lego_rl.proxy.stopstrings import StopScanner, cut_at_stop
from lego_rl.testing.scripted_inference import scripted_logprob, scripted_proxy
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

REPLY = "Run it.\nObservation: ran\nObservation: again"
BEFORE = "Run it."
STOP = "\nObservation:"  # a ReAct harness's stop


def scan(pieces: list[str], stops: list[str]) -> tuple[list[str], str | None]:
    scanner = StopScanner(stops)
    sent = [scanner.push(p) for p in pieces]
    return [*sent, scanner.flush()], scanner.hit


def test_a_stop_string_split_across_pieces_is_found_and_never_sent():
    sent, hit = scan(["Run it.\nObs", "erva", "tion: ran"], [STOP])
    assert hit == STOP and "".join(sent) == BEFORE
    assert sent[0] == "Run it."  # "\nObs" may begin the stop string: held back


def test_a_held_tail_that_does_not_become_a_stop_string_is_sent():
    sent, hit = scan(["a\nObs", "cure", " end\nOb"], [STOP])
    assert hit is None and "".join(sent) == "a\nObscure end\nOb"
    assert sent[-1] == "\nOb"  # held to the end, then flushed


def test_the_earliest_of_several_stop_strings_wins():
    sent, hit = scan(["x ## y END z"], ["END", "##"])
    assert (hit, "".join(sent)) == ("##", "x ")
    assert scan(["no stops here"], []) == (["no stops here", ""], None)


def test_a_generation_is_cut_at_the_token_that_completes_the_stop_string():
    tokenizer = tiny_chat_tokenizer()
    ids = tokenizer.encode(REPLY, add_special_tokens=False)
    gen = Generation(completion_ids=ids, logprobs=[scripted_logprob(i) for i in range(len(ids))], finish_reason="length")
    cut, hit = cut_at_stop(tokenizer, gen, [STOP], [tokenizer.eos_token_id])
    n = len(BEFORE + STOP)  # a byte-level tokenizer: one token a character
    assert hit == STOP and list(cut.completion_ids) == ids[:n] and cut.finish_reason == "stop"
    assert list(cut.logprobs) == gen.logprobs[:n]
    assert cut_at_stop(tokenizer, gen, [], [])[0] is gen


def openai_client(server, session):
    return openai.OpenAI(base_url=session.base_url(server.url) + "/v1", api_key=session.api_key, max_retries=0)


@pytest.mark.parametrize("stream", [False, True])
def test_openai_chat_stop_ends_the_reply_and_keeps_the_sampled_stop(stream):
    with scripted_proxy({"openai-chat": OpenAIChatDialect()}, [REPLY]) as (server, session, _):
        client = openai_client(server, session)
        messages = [{"role": "user", "content": "go"}]
        if stream:
            chunks = list(client.chat.completions.create(model="m", messages=messages, stop=STOP, stream=True))
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            finish = next(c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason)
        else:
            reply = client.chat.completions.create(model="m", messages=messages, stop=[STOP, "never"])
            text, finish = reply.choices[0].message.content, reply.choices[0].finish_reason
        assert (text, finish) == (BEFORE, "stop")
        [call] = session.calls
        sampled = tiny_chat_tokenizer().encode(BEFORE + STOP, add_special_tokens=False)
        assert call.completion_ids == tuple(sampled) and call.finish_reason == "stop"
        assert call.logprobs == tuple(scripted_logprob(i) for i in range(len(BEFORE + STOP)))


def test_openai_chat_rejects_malformed_stop():
    with scripted_proxy({"openai-chat": OpenAIChatDialect()}, []) as (server, session, _):
        client = openai_client(server, session)
        messages = [{"role": "user", "content": "go"}]
        with pytest.raises(openai.BadRequestError, match="at most 4"):
            client.chat.completions.create(model="m", messages=messages, stop=["a", "b", "c", "d", "e"])
        with pytest.raises(openai.BadRequestError, match="stop must be"):
            client.chat.completions.create(model="m", messages=messages, extra_body={"stop": [1]})
        assert not session.calls


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_stop_sequences_report_the_sequence_and_a_changed_echo_starts_a_segment(stream):
    with scripted_proxy({"anthropic-messages": AnthropicDialect()}, [REPLY, "Fine."]) as (server, session, _):
        client = anthropic.Anthropic(base_url=session.base_url(server.url), api_key=session.api_key, max_retries=0)
        messages = [{"role": "user", "content": "go"}]
        ask = {"model": "m", "max_tokens": 100, "stop_sequences": [STOP]}
        if stream:
            with client.messages.stream(messages=messages, **ask) as events:
                first = events.get_final_message()
        else:
            first = client.messages.create(messages=messages, **ask)
        assert (first.stop_reason, first.stop_sequence) == ("stop_sequence", STOP)
        assert [b.text for b in first.content] == [BEFORE]
        messages += [{"role": "assistant", "content": BEFORE}, {"role": "user", "content": "ran"}]
        second = client.messages.create(messages=messages, model="m", max_tokens=100)
        assert (second.stop_reason, second.stop_sequence) == ("end_turn", None)
        assert len(session.calls[0].completion_ids) == len(BEFORE + STOP)
        assert not session.calls[1].extends_previous  # the echo lacks the sampled stop string
        assert len(session.trajectory().segments) == 2
        [metrics] = session.metrics()
        assert metrics["sampled_share"] == 1.0
