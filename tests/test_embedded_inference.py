"""The hf inference plugin: sampling faithfulness, routing capture, weight updates, the model stack."""

from __future__ import annotations

import threading

import pytest
import torch
from legorl_embedded.inference.hf import (
    HFInference,
    HFInferenceOptions,
    factory,
    sampling_logprobs,
)
from legorl_embedded.policy.model import build_model, save_checkpoint
from legorl_embedded.policy.routing import find_routers

from lego_rl.data import Sampling
from lego_rl.registry import BuildContext
from lego_rl.spec.models import Block, ModelSpec, RunSpec, Spec

TINY = ModelSpec(name="tiny", max_context=256)
CPU = HFInferenceOptions(device="cpu", threads=1)  # one thread: far faster on a busy 2-core machine


@pytest.fixture(scope="module")
def inf() -> HFInference:
    return HFInference(TINY, CPU, seed=0)


@pytest.fixture(scope="module")
def prompt(inf) -> list[int]:
    messages = [{"role": "user", "content": "Fix the bug in a.py"}]
    return inf.tokenizer.encode(inf.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))


def rescore(inf: HFInference, prompt: list[int], completion: list[int], sampling: Sampling) -> torch.Tensor:
    """Log-probs of the completion from one full forward pass over prompt + completion."""
    with torch.no_grad():
        logits = inf.model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
    logprobs = sampling_logprobs(logits[len(prompt) - 1 : -1], sampling)
    return logprobs.gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)


@pytest.fixture
def eos_boost(inf):
    """A test double for a policy that wants to stop: +100 on the eos logit."""
    eos = inf.tokenizer.eos_token_id

    def boost(_module, _inputs, output):
        output[..., eos] += 100.0
        return output

    handle = inf.model.lm_head.register_forward_hook(boost)
    yield eos
    handle.remove()


# ---------------------------------------------------------------- construction and checks


def test_construction_is_lazy_and_preflight_clean():
    fresh = HFInference(TINY, CPU)
    assert fresh._model is None
    assert fresh.preflight() == []
    assert fresh._model is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_preflight_cuda_without_gpu_is_fatal():
    problems = HFInference(TINY, HFInferenceOptions(device="cuda")).preflight()
    assert len(problems) == 1 and problems[0].fatal and "needs a GPU" in problems[0].message


def test_preflight_reports_missing_checkpoint(tmp_path):
    spec = TINY.model_copy(update={"path": str(tmp_path / "nope")})
    (problem,) = HFInference(spec).preflight()
    assert "not a local checkpoint" in problem.message


def test_options_forbid_unknown_keys():
    with pytest.raises(ValueError):
        HFInferenceOptions(dtype="float32", temprature=1.0)


def test_registers_hf_and_factory_reads_spec(tmp_path):
    from legorl_embedded.plugin import legorl_register_inference

    registered = {}
    legorl_register_inference(lambda name, fn, options: registered.update({name: (fn, options)}))
    assert registered["hf"][1] is HFInferenceOptions
    block = Block(plugin="x")
    spec = Spec(
        model=TINY.model_copy(update={"chat_template": "my.jinja"}),
        run=RunSpec(seed=7),
        tasks=block, sandbox=block, harness=block, dialect=block, verifier=block,
        optimizer=block, inference=block, trainer=block,
    )
    built = factory(HFInferenceOptions(), BuildContext(spec=spec, spec_dir=tmp_path))
    assert built.seed == 7 and built.spec.chat_template == str(tmp_path / "my.jinja")
    assert built._model is None


# ---------------------------------------------------------------- generation


def test_generate_shapes_and_routing(inf, prompt):
    gen = inf.generate(prompt, Sampling(max_tokens=12, seed=1))
    n = len(gen.completion_ids)
    assert 1 <= n <= 12 and len(gen.logprobs) == n
    assert gen.finish_reason == ("stop" if gen.completion_ids[-1] == inf.tokenizer.eos_token_id else "length")
    layers, k = inf.model.config.num_hidden_layers, inf.model.config.num_experts_per_tok
    assert len(gen.routing) == n and len(gen.prompt_routing) == len(prompt)
    for row in gen.routing + gen.prompt_routing:
        assert len(row) == layers and all(len(experts) == k and len(set(experts)) == k for experts in row)
        assert all(0 <= e < inf.model.config.num_experts for experts in row for e in experts)


def test_routing_matches_a_full_forward(inf, prompt):
    """Decode-time routing of each token equals its routing in one forward over the whole sequence."""
    gen = inf.generate(prompt, Sampling(max_tokens=8, seed=2))
    recorded = []
    hooks = [r.register_forward_hook(lambda m, i, o: recorded.append(o[2])) for r in find_routers(inf.model)]
    with torch.no_grad():
        inf.model(input_ids=torch.tensor([prompt + gen.completion_ids]))
    for h in hooks:
        h.remove()
    full = torch.stack(recorded, dim=1).tolist()
    assert gen.prompt_routing + gen.routing == full


@pytest.mark.parametrize(
    "sampling",
    [Sampling(max_tokens=16, seed=3), Sampling(max_tokens=16, seed=4, temperature=0.7, top_p=0.9, top_k=50)],
    ids=["t1", "t0.7-p0.9-k50"],
)
def test_logprobs_equal_full_forward_rescoring(inf, prompt, sampling):
    gen = inf.generate(prompt, sampling)
    expected = rescore(inf, prompt, gen.completion_ids, sampling)
    assert torch.allclose(torch.tensor(gen.logprobs), expected, atol=1e-4)
    assert all(lp < 0 for lp in gen.logprobs)


def test_on_token_streams_each_sampled_token_in_order(inf, prompt):
    streamed: list[tuple[int, float, str]] = []
    gen = inf.generate(
        prompt,
        Sampling(max_tokens=10, seed=7),
        on_token=lambda tid, lp: streamed.append((tid, lp, threading.current_thread().name)),
    )
    assert [(t, lp) for t, lp, _ in streamed] == list(zip(gen.completion_ids, gen.logprobs))
    assert {name for *_, name in streamed} == {threading.current_thread().name}
    assert inf.generate(prompt, Sampling(max_tokens=10, seed=7)).completion_ids == gen.completion_ids


def test_top_k_1_is_greedy_with_logprob_zero(inf, prompt):
    top1 = inf.generate(prompt, Sampling(max_tokens=6, top_k=1, seed=5))
    greedy = inf.generate(prompt, Sampling(max_tokens=6, temperature=0))
    assert top1.logprobs == [0.0] * len(top1.completion_ids)
    assert greedy.logprobs == [0.0] * len(greedy.completion_ids)
    assert top1.completion_ids == greedy.completion_ids


def test_seeded_sampling_is_reproducible(inf, prompt):
    a = inf.generate(prompt, Sampling(max_tokens=8, seed=11))
    b = inf.generate(prompt, Sampling(max_tokens=8, seed=11))
    c = inf.generate(prompt, Sampling(max_tokens=8, seed=12))
    assert a.completion_ids == b.completion_ids != c.completion_ids


def test_stops_at_eos_and_includes_it(inf, prompt, eos_boost):
    gen = inf.generate(prompt, Sampling(max_tokens=20, seed=6))
    assert gen.completion_ids == [eos_boost] and gen.finish_reason == "stop"
    assert len(gen.routing) == 1 and gen.logprobs[0] > -1e-3


def test_stops_at_stop_token_ids(inf, prompt):
    first = inf.generate(prompt, Sampling(max_tokens=1, temperature=0)).completion_ids[0]
    gen = inf.generate(prompt, Sampling(max_tokens=20, temperature=0, stop_token_ids=[first]))
    assert gen.completion_ids == [first] and gen.finish_reason == "stop"


def test_stops_at_the_token_that_completes_a_stop_string(inf, prompt):
    from lego_rl.proxy.stopstrings import cut_at_stop

    free = inf.generate(prompt, Sampling(max_tokens=24, seed=5))
    text = inf.tokenizer.decode(free.completion_ids[:12], skip_special_tokens=False)
    stop = text[-3:].strip() or text[-6:]  # ends inside the 12th token's text or just before
    gen = inf.generate(prompt, Sampling(max_tokens=24, seed=5, stop=[stop]))
    cut, hit = cut_at_stop(inf.tokenizer, free, [stop], [inf.tokenizer.eos_token_id])
    assert hit == stop and gen.finish_reason == "stop"
    assert gen.completion_ids == cut.completion_ids == free.completion_ids[: len(gen.completion_ids)]
    assert len(gen.completion_ids) <= 12 and gen.logprobs == free.logprobs[: len(gen.logprobs)]


def test_never_exceeds_max_context(inf):
    prompt = [100] * (TINY.max_context - 3)
    gen = inf.generate(prompt, Sampling(max_tokens=50, temperature=0))
    assert len(gen.completion_ids) == 3 and gen.finish_reason == "length"
    full = inf.generate([100] * TINY.max_context, Sampling(max_tokens=5))
    assert full.completion_ids == [] and full.finish_reason == "length"


def test_concurrent_seeded_calls_sample_the_same_tokens(inf, prompt):
    results = {}

    def work(i: int) -> None:
        results[i] = inf.generate(prompt, Sampling(max_tokens=6, seed=20))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({tuple(g.completion_ids) for g in results.values()}) == 1


# ---------------------------------------------------------------- weights


def test_load_weights_changes_outputs_and_bumps_version(prompt):
    local = HFInference(TINY, CPU, seed=0)
    before = rescore(local, prompt, [local.tokenizer.eos_token_id], Sampling())
    state = {k: v.clone() for k, v in local.state_dict().items()}
    state["model.norm.weight"] = state["model.norm.weight"] * 3.0
    local.load_weights(state, version=5)
    after = rescore(local, prompt, [local.tokenizer.eos_token_id], Sampling())
    assert local.policy_version == 5 and not torch.allclose(before, after)
    assert local.generate(prompt, Sampling(max_tokens=2)).policy_version == 5


def test_bfloat16_option(prompt):
    bf16 = HFInference(TINY, CPU.model_copy(update={"dtype": "bfloat16"}), seed=0)
    gen = bf16.generate(prompt, Sampling(max_tokens=6, seed=1))
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    assert len(gen.routing) == len(gen.completion_ids) and all(lp <= 0 for lp in gen.logprobs)
    fp32_state = {k: v.float() for k, v in bf16.state_dict().items()}
    bf16.load_weights(fp32_state, version=1)  # the trainer's fp32 weights are cast on load
    assert next(bf16.model.parameters()).dtype == torch.bfloat16


# ---------------------------------------------------------------- model stack


def test_build_is_deterministic_per_seed(inf):
    a, c = (build_model(TINY, inf.tokenizer, seed=s) for s in (0, 1))
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), inf.model.state_dict().values()))
    assert not torch.equal(a.model.layers[0].mlp.gate.weight, c.model.layers[0].mlp.gate.weight)
    assert a.config.vocab_size == len(inf.tokenizer) and a.config.max_position_embeddings == 256


def test_dense_architecture_has_no_routing(inf, prompt):
    dense = HFInference(TINY.model_copy(update={"architecture": "qwen3"}), CPU)
    gen = dense.generate(prompt, Sampling(max_tokens=4, seed=1))
    assert gen.routing is None and gen.prompt_routing is None and 1 <= len(gen.completion_ids) <= 4
    assert find_routers(dense.model) == []


def test_config_overrides_and_unknown_architecture(inf):
    bigger = build_model(TINY.model_copy(update={"config": {"num_hidden_layers": 3, "num_experts": 8}}), inf.tokenizer)
    assert len(find_routers(bigger)) == 3 and bigger.config.num_experts == 8
    with pytest.raises(ValueError, match="buildable: qwen3-moe, qwen3"):
        build_model(TINY.model_copy(update={"architecture": "llama"}), inf.tokenizer)


@pytest.mark.slow
def test_checkpoint_round_trip(inf, prompt, tmp_path):
    save_checkpoint(inf.model, inf.tokenizer, tmp_path / "ckpt")
    loaded = HFInference(TINY.model_copy(update={"path": str(tmp_path / "ckpt")}), CPU)
    assert loaded.preflight() == []
    greedy = Sampling(max_tokens=6, temperature=0)
    assert loaded.generate(prompt, greedy).completion_ids == inf.generate(prompt, greedy).completion_ids
