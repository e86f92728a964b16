"""The hf backend's abort (AbortsGenerations): a generation whose abort is set leaves the batch at
its next step with what it drew, and the others in the batch go on as they would alone."""

from __future__ import annotations

import threading

import pytest
import torch
import transformers
from legorl_embedded.inference.hf import HFInference, HFInferenceOptions

from lego_rl.data import ABORTED, Generation, Sampling
from lego_rl.kinds import AbortsGenerations

EOS = 0
COMMON = {
    "vocab_size": 512,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "max_position_embeddings": 512,
}
PROMPT = list(range(5, 12))
OTHER = list(range(40, 70))
LONG = Sampling(max_tokens=100, seed=1)
"""Long enough that the abort ends it early (the tiny random model rarely draws eos, token 0)."""


def backend(kind: str) -> HFInference:
    torch.manual_seed(0)
    if kind == "dense":
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**COMMON))
    else:
        moe = {"moe_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": 2}
        config = transformers.Qwen3MoeConfig(**COMMON, **moe, experts_implementation="eager")
        model = transformers.Qwen3MoeForCausalLM(config)
    options = HFInferenceOptions(device="cpu", threads=1)
    return HFInference.from_model(model, eos=EOS, max_context=512, options=options, seed=0)


@pytest.fixture(scope="module", params=["moe", "dense"])
def inf(request) -> HFInference:
    return backend(request.param)


def test_an_aborted_generation_returns_what_it_drew_and_leaves_the_batch(inf):
    assert isinstance(inf, AbortsGenerations)
    alone = inf.generate(PROMPT, LONG)
    abort = threading.Event()
    seen: list[int] = []

    def on_token(token: int, _logprob: float) -> None:
        seen.append(token)
        if len(seen) == 5:
            abort.set()

    gen = inf.generate_abortable(PROMPT, LONG, abort, on_token)
    assert gen.finish_reason == ABORTED
    assert 5 <= len(gen.completion_ids) < len(alone.completion_ids)  # by its token count
    assert gen.completion_ids == alone.completion_ids[: len(gen.completion_ids)] == seen
    assert len(gen.logprobs) == len(gen.completion_ids)
    if gen.routing is not None:
        assert len(gen.routing) == len(gen.completion_ids)
    assert not inf.batcher._rows  # the slot is free


def test_an_abort_before_admission_never_prefills(inf):
    abort = threading.Event()
    abort.set()
    before = dict(inf.batcher.stats)
    gen = inf.generate_abortable(PROMPT, LONG, abort)
    assert gen.completion_ids == [] and gen.finish_reason == ABORTED
    assert inf.batcher.stats == before


def test_an_abort_leaves_the_rest_of_the_batch_as_it_would_be_alone(inf):
    good = Sampling(max_tokens=12, seed=7)
    alone = inf.generate(OTHER, good)
    abort = threading.Event()
    out: dict[str, Generation] = {}

    def aborted() -> None:
        def on_token(_token: int, _logprob: float) -> None:
            if "good" in out:  # it left when the other was done: they shared the batch
                abort.set()

        out["aborted"] = inf.generate_abortable(PROMPT, LONG, abort, on_token)

    def fine() -> None:
        out["good"] = inf.generate(OTHER, good)

    threads = [threading.Thread(target=aborted), threading.Thread(target=fine)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out["aborted"].finish_reason == ABORTED
    assert len(out["aborted"].completion_ids) < LONG.max_tokens
    good_gen = out["good"]
    assert good_gen.completion_ids == alone.completion_ids
    assert torch.allclose(torch.tensor(good_gen.logprobs), torch.tensor(alone.logprobs), atol=1e-5)
    assert good_gen.routing == alone.routing and good_gen.finish_reason == alone.finish_reason


def test_a_generation_that_ends_first_is_returned_as_it_ended(inf):
    short = Sampling(max_tokens=4, seed=3)
    abort = threading.Event()
    gen = inf.generate_abortable(PROMPT, short, abort, lambda *_: None)
    abort.set()  # too late: it ended on its own
    assert gen.finish_reason in ("stop", "length") and len(gen.completion_ids) <= 4
    assert gen.completion_ids == inf.generate(PROMPT, short).completion_ids
