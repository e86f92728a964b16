"""The ``scripted`` inference plugin: scripted replies in the policy's format, scored by the model."""

from __future__ import annotations

import pytest
import torch
from legorl_embedded.inference.hf import HFInference, HFInferenceOptions
from legorl_embedded.inference.scripted import ScriptedInference, render_turn
from legorl_embedded.inference.scripted_options import ScriptedInferenceOptions, ScriptTurn

from lego_rl.data import Sampling
from lego_rl.proxy.toolcalls import parse_completion
from lego_rl.spec.models import ModelSpec

TINY = ModelSpec(name="tiny", max_context=512)
FIX = {"text": "Fixing.", "tool_calls": [{"name": "Bash", "arguments": {"command": "sed -i 's/-/+/' calc.py"}}]}


@pytest.fixture(scope="module")
def policy() -> HFInference:
    return HFInference(TINY, HFInferenceOptions(device="cpu", threads=1), seed=0)


@pytest.fixture(scope="module")
def prompt(policy: HFInference) -> list[int]:
    messages = [{"role": "user", "content": "Fix calc.py"}]
    text = policy.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return policy.tokenizer.encode(text, add_special_tokens=False)


def scripted(policy: HFInference, *turns: dict, final_text: str = "Done.") -> ScriptedInference:
    options = ScriptedInferenceOptions.model_validate({"turns": list(turns), "final_text": final_text})
    return ScriptedInference(options, policy)


def test_turn_renders_as_the_chat_template_renders_an_assistant_message(policy: HFInference) -> None:
    turn = ScriptTurn.model_validate({**FIX, "tool_calls": FIX["tool_calls"] * 2})
    call = {"type": "function", "function": FIX["tool_calls"][0]}
    message = {"role": "assistant", "content": turn.text, "tool_calls": [call, call]}
    rendered = policy.tokenizer.apply_chat_template([{"role": "user", "content": "x"}, message], tokenize=False)
    assert f"<|im_start|>assistant\n{render_turn(turn)}<|im_end|>" in rendered
    parsed = parse_completion(render_turn(turn))
    assert parsed.content == "Fixing." and len(parsed.tool_calls) == 2
    assert render_turn(ScriptTurn(tool_calls=turn.tool_calls[:1])).startswith("<tool_call>\n{")


def test_replies_are_the_script_scored_by_the_model(policy: HFInference, prompt: list[int]) -> None:
    inference = scripted(policy, FIX)
    streamed: list[tuple[int, float]] = []
    sampling = Sampling(temperature=0.7, max_tokens=200)

    gen = inference.generate(prompt, sampling, on_token=lambda t, lp: streamed.append((t, lp)))

    tok = policy.tokenizer
    assert gen.completion_ids == [*tok.encode(render_turn(ScriptTurn.model_validate(FIX))), tok.eos_token_id]
    assert gen.finish_reason == "stop"
    assert streamed == list(zip(gen.completion_ids, gen.logprobs, strict=True))
    with torch.no_grad():  # independent check: full logits at temperature 0.7
        logits = policy.model(input_ids=torch.tensor([prompt + gen.completion_ids])).logits[0].float()
    expected = torch.log_softmax(logits[len(prompt) - 1 : -1] / 0.7, dim=-1)
    expected = expected.gather(-1, torch.tensor(gen.completion_ids)[:, None]).squeeze(-1)
    assert torch.allclose(torch.tensor(gen.logprobs), expected, atol=1e-4)
    assert all(lp < 0 for lp in gen.logprobs)
    assert gen.routing is not None and len(gen.routing) == len(gen.completion_ids)
    assert gen.prompt_routing is not None and len(gen.prompt_routing) == len(prompt)
    layers, k = len(gen.routing[0]), len(gen.routing[0][0])
    assert (layers, k) == (policy.model.config.num_hidden_layers, policy.model.config.num_experts_per_tok)


def test_final_text_after_the_script_and_cut_at_max_tokens(policy: HFInference, prompt: list[int]) -> None:
    inference = scripted(policy, {"text": "one"}, final_text="the end")
    tok = policy.tokenizer
    first = inference.generate(prompt, Sampling(max_tokens=50))
    second = inference.generate(prompt, Sampling(max_tokens=50))
    third = inference.generate(prompt, Sampling(max_tokens=1))
    assert tok.decode(first.completion_ids[:-1]) == "one"
    assert tok.decode(second.completion_ids[:-1]) == "the end"
    assert len(third.completion_ids) == 1 and third.finish_reason == "length"
    assert inference.calls == 3


def test_by_call_gives_each_session_one_path_whatever_the_interleaving(policy: HFInference, prompt: list[int]) -> None:
    options = ScriptedInferenceOptions.model_validate(
        {"by_call": [[{"text": "a0"}, {"text": "b0"}], [{"text": "a1"}]], "final_text": "end"}
    )
    inference = ScriptedInference(options, policy)
    tok = policy.tokenizer

    def later(reply: str) -> list[int]:  # the prompt of a session's next call, after ``reply``
        messages = [{"role": "user", "content": "Fix calc.py"}, {"role": "assistant", "content": reply},
                    {"role": "user", "content": "ok"}]  # fmt: skip
        return tok.encode(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))

    def reply(ids: list[int]) -> str:
        return tok.decode(inference.generate(ids, Sampling(max_tokens=20)).completion_ids[:-1])

    # two sessions start, then the first one's second call: each list is taken in its own order
    assert [reply(prompt), reply(prompt), reply(later("a0")), reply(later("b0"))] == ["a0", "b0", "a1", "end"]
    assert reply(prompt) == "end" and inference.calls == 5
