"""Continuous batching in the hf backend: a request decoded in a batch computes what it would alone."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import torch
import transformers
from legorl_embedded.inference import batcher as batcher_module
from legorl_embedded.inference.hf import HFInference, HFInferenceOptions
from legorl_embedded.inference.sampling import draw, draw_rows, sampling_logprobs
from legorl_embedded.policy.routing import find_routers

from lego_rl.data import Generation, Sampling

EOS = 0
COMMON = {
    "vocab_size": 512,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "max_position_embeddings": 256,
}
PROMPTS = [list(range(5, 12)), list(range(40, 70)), [3, 4, 5], list(range(100, 115))]
SAMPLINGS = [
    Sampling(max_tokens=20, seed=1),
    Sampling(max_tokens=6, seed=2, temperature=0.7, top_p=0.9, top_k=50),
    Sampling(max_tokens=24, temperature=0),
    Sampling(max_tokens=12, seed=4, temperature=1.3),
]


def tiny(kind: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "dense":
        return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**COMMON))
    moe = {"moe_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": 2}
    config = transformers.Qwen3MoeConfig(**COMMON, **moe, experts_implementation="eager")
    return transformers.Qwen3MoeForCausalLM(config)


def backend(kind: str = "moe", max_batch: int = 32, prefix_cache_mb: int = 256) -> HFInference:
    options = HFInferenceOptions(device="cpu", threads=1, prefix_cache_mb=prefix_cache_mb)
    return HFInference.from_model(
        tiny(kind), eos=EOS, max_context=256, options=options, seed=0, max_batch=max_batch
    )


def together(inf: HFInference, prompts: list[list[int]], samplings: list[Sampling]) -> list[Generation]:
    """All calls from their own threads, admitted at the same step (held back until all wait)."""
    out: dict[int, Generation] = {}
    threads = [
        threading.Thread(target=lambda i=i: out.__setitem__(i, inf.generate(prompts[i], samplings[i])))
        for i in range(len(prompts))
    ]
    with inf.batcher.paused():
        for t in threads:
            t.start()
        while inf.batcher.waiting < len(prompts):
            time.sleep(0.005)
    for t in threads:
        t.join()
    return [out[i] for i in range(len(prompts))]


def assert_same(batched: Generation, alone: Generation) -> None:
    assert batched.completion_ids == alone.completion_ids
    assert torch.allclose(torch.tensor(batched.logprobs), torch.tensor(alone.logprobs), atol=1e-5)
    assert batched.routing == alone.routing and batched.prompt_routing == alone.prompt_routing
    assert batched.finish_reason == alone.finish_reason


@pytest.fixture(scope="module", params=["moe", "dense"])
def runs(request) -> tuple[HFInference, list[Generation], list[Generation]]:
    inf = backend(request.param)
    alone = [inf.generate(p, s) for p, s in zip(PROMPTS, SAMPLINGS, strict=True)]
    batched = together(inf, PROMPTS, SAMPLINGS)
    return inf, alone, batched


def test_batched_requests_equal_each_alone(runs):
    inf, alone, batched = runs
    assert inf.batcher.stats["max_rows"] == len(PROMPTS)  # really decoded together
    for b, a in zip(batched, alone, strict=True):
        assert_same(b, a)
    assert [len(g.completion_ids) for g in batched] == [s.max_tokens for s in SAMPLINGS]


def test_batched_logprobs_and_routing_equal_teacher_forcing(runs):
    """Each row's log-probs and routing equal one unpadded forward over its prompt + completion."""
    inf, _, batched = runs
    routers = find_routers(inf.model)
    for prompt, sampling, gen in zip(PROMPTS, SAMPLINGS, batched, strict=True):
        recorded: list[torch.Tensor] = []
        hooks = [r.register_forward_hook(lambda m, i, o, rec=recorded: rec.append(o[2])) for r in routers]
        with torch.no_grad():
            logits = inf.model(input_ids=torch.tensor([prompt + gen.completion_ids])).logits[0]
        for h in hooks:
            h.remove()
        if sampling.temperature == 0:
            assert gen.completion_ids == logits[len(prompt) - 1 : -1].argmax(-1).tolist()
            continue
        expected = sampling_logprobs(logits[len(prompt) - 1 : -1], sampling)
        expected = expected.gather(-1, torch.tensor(gen.completion_ids)[:, None]).squeeze(-1)
        assert torch.allclose(torch.tensor(gen.logprobs), expected, atol=1e-4)
        if routers:
            assert gen.prompt_routing + gen.routing == torch.stack(recorded, dim=1).tolist()


@pytest.mark.parametrize("kind", ["moe", "dense"])
def test_a_shared_prefix_is_prefilled_once_and_changes_nothing(kind: str):
    """Calls sharing a system prompt, then a session's next turn: each prefills only what is new,
    and samples what a backend without the cache samples, with the same log-probs and routing."""
    system = list(range(200, 260))
    sampling = Sampling(max_tokens=10, seed=3)
    cached, plain = backend(kind), backend(kind, prefix_cache_mb=0)
    first = [cached.generate(system + [7, 8, 9], sampling), plain.generate(system + [7, 8, 9], sampling)]
    other = [inf.generate(system + [11, 12], sampling) for inf in (cached, plain)]
    turn = system + [7, 8, 9] + first[0].completion_ids + [13, 14]
    second = [inf.generate(turn, sampling) for inf in (cached, plain)]
    for pair in (first, other, second):
        assert_same(*pair)
    stats = cached.batcher.prefixes.stats
    assert (stats["lookups"], stats["hits"]) == (3, 2)
    assert stats["reused_tokens"] == len(system) + len(system) + 3  # prompts are kept, not completions
    assert plain.batcher.prefixes is None

    cached.load_weights(cached.state_dict(), version=1)  # a new policy: nothing is reused
    assert_same(cached.generate(turn, sampling).model_copy(update={"policy_version": 0}), second[1])
    assert stats["hits"] == 2 and len(cached.batcher.prefixes) == 1


def test_max_batch_1_decodes_one_call_at_a_time():
    inf = backend(max_batch=1)
    alone = [inf.generate(p, s) for p, s in zip(PROMPTS[:2], SAMPLINGS[:2], strict=True)]
    batched = together(inf, PROMPTS[:2], SAMPLINGS[:2])
    assert inf.batcher.stats["max_rows"] == 1
    for b, a in zip(batched, alone, strict=True):
        assert_same(b, a)


def test_a_request_joins_a_running_batch():
    """B arrives while A decodes: it joins at the next step, each streams on its own thread."""
    inf = backend()
    a_sampling, b_sampling = Sampling(max_tokens=200, seed=5), Sampling(max_tokens=8, seed=6)
    a_alone, b_alone = inf.generate(PROMPTS[0], a_sampling), inf.generate(PROMPTS[1], b_sampling)
    out: dict[str, Generation] = {}
    streamed: dict[str, list[tuple[int, str]]] = {"a": [], "b": []}
    third = threading.Event()

    def call(name: str, prompt: list[int], sampling: Sampling) -> None:
        def on_token(token: int, _lp: float) -> None:
            streamed[name].append((token, threading.current_thread().name))
            if len(streamed[name]) == 3:
                third.set()

        out[name] = inf.generate(prompt, sampling, on_token=on_token)

    a = threading.Thread(target=call, args=("a", PROMPTS[0], a_sampling), name="caller-a")
    a.start()
    third.wait()  # A is decoding
    b = threading.Thread(target=call, args=("b", PROMPTS[1], b_sampling), name="caller-b")
    b.start()
    a.join()
    b.join()
    assert inf.batcher.stats["max_rows"] == 2
    assert_same(out["a"], a_alone)
    assert_same(out["b"], b_alone)
    for name in ("a", "b"):
        assert [t for t, _ in streamed[name]] == out[name].completion_ids
        assert {thread for _, thread in streamed[name]} == {f"caller-{name}"}


def test_weight_update_waits_for_the_batch_and_versions_each_generation():
    inf = backend()
    old, new = Sampling(max_tokens=40, seed=7), Sampling(max_tokens=5, seed=8)
    a_alone = inf.generate(PROMPTS[0], old)
    state = {k: v.clone() for k, v in inf.state_dict().items()}
    state["model.norm.weight"] = state["model.norm.weight"] * 3.0
    order: list[str] = []
    out: dict[str, Generation] = {}
    first = threading.Event()

    def a_call() -> None:
        out["a"] = inf.generate(PROMPTS[0], old, on_token=lambda t, lp: first.set())
        order.append("a done")

    def update() -> None:
        inf.load_weights(state, version=1)
        order.append("updated")

    def b_call() -> None:
        out["b"] = inf.generate(PROMPTS[1], new)

    threads = [threading.Thread(target=f) for f in (a_call, update, b_call)]
    threads[0].start()
    first.wait()  # a is generating: the update must wait for it (however slow the machine)
    threads[1].start()
    while not inf.batcher.pausing:
        time.sleep(0.001)
    threads[2].start()  # arrives while the update waits: sampled with the new weights
    for t in threads:
        t.join()
    assert sorted(order) == ["a done", "updated"]  # the update returned (a's caller may wake later)
    assert out["a"].policy_version == 0 and out["b"].policy_version == 1
    assert_same(out["a"], a_alone)
    assert_same(out["b"], inf.generate(PROMPTS[1], new))


def test_a_failing_on_token_stops_only_its_request():
    inf = backend()
    good = Sampling(max_tokens=10, seed=9)
    alone = inf.generate(PROMPTS[3], good)
    out: dict[str, object] = {}

    def bad() -> None:
        def on_token(token: int, _lp: float) -> None:
            raise ValueError("client went away")

        try:
            inf.generate(PROMPTS[0], Sampling(max_tokens=200, seed=1), on_token=on_token)
        except ValueError as exc:
            out["bad"] = exc

    def fine() -> None:
        out["good"] = inf.generate(PROMPTS[3], good)

    threads = [threading.Thread(target=bad), threading.Thread(target=fine)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert str(out["bad"]) == "client went away"
    assert_same(out["good"], alone)
    # The cancelled row left before its 200 tokens (10 + 10: the good call, alone then with it).
    # How soon depends on when the caller's thread runs, so only "before the end" is checked.
    assert inf.batcher.stats["row_steps"] < 10 + 10 + 200


def test_a_model_failure_reaches_every_caller_and_the_loop_recovers():
    inf = backend()

    def boom(*_args):
        raise RuntimeError("device lost")

    handle = inf.model.get_output_embeddings().register_forward_hook(boom)
    errors: list[BaseException] = []

    def call(i: int) -> None:
        try:
            inf.generate(PROMPTS[i], Sampling(max_tokens=4, seed=i))
        except RuntimeError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    handle.remove()
    assert len(errors) == 2
    assert all("hf inference failed" in str(e) and "device lost" in str(e) for e in errors)
    assert len(inf.generate(PROMPTS[0], Sampling(max_tokens=3, seed=0)).completion_ids) == 3


def test_idle_worker_exits_and_restarts(monkeypatch):
    monkeypatch.setattr(batcher_module, "IDLE_S", 0.05)
    inf = backend("dense")
    inf.generate(PROMPTS[2], Sampling(max_tokens=2, temperature=0))
    while inf.batcher.running:  # the worker exits once idle (bound: the test timeout)
        time.sleep(0.01)
    assert len(inf.generate(PROMPTS[2], Sampling(max_tokens=2, temperature=0)).completion_ids) == 2


def test_draw_rows_equals_drawing_each_row_alone():
    logits = torch.randn(4, 300, generator=torch.Generator().manual_seed(0))
    samplings = [SAMPLINGS[0], SAMPLINGS[1], SAMPLINGS[2], SAMPLINGS[0]]
    tokens, logprobs = draw_rows(logits, samplings, [torch.Generator().manual_seed(i) for i in range(4)])
    for i, s in enumerate(samplings):
        token, lp = draw(logits[i : i + 1], s, [torch.Generator().manual_seed(i)])
        assert (tokens[i], logprobs[i]) == (int(token), float(lp))


@pytest.mark.slow
def test_inference_benchmark_smoke(capsys):
    from legorl_embedded.inference.bench import main

    spec = Path(__file__).parents[1] / "specs" / "mini-swe-agent-local.yaml"
    args = ["--spec", str(spec), "--concurrency", "1,2", "--rounds", "1", "--tokens", "3"]
    figures = main([*args, "--prompt-tokens", "8", "--threads", "1", "--device", "cpu"])
    assert set(figures["tokens_per_s"]) == {"1", "2"} and figures["speedup"]["1"] == 1.0
    assert figures["mean_batch"]["2"] >= 1.0 and figures["tokens_per_s"]["2"] > 0
    assert "concurrency   2" in capsys.readouterr().out
