"""A restricted output vocabulary (model.config.output_vocab): sampling and scoring share it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import transformers
from legorl_embedded.inference.hf import HFInference, HFInferenceOptions
from legorl_embedded.policy.logprobs import token_logprobs
from legorl_embedded.policy.output_vocab import OutputVocab
from legorl_embedded.training.supervise import cover_replies

from lego_rl.data import Sampling

VOCAB = 512
EXTRA = [400, 450]


def tiny(**extra) -> torch.nn.Module:
    config = transformers.Qwen3MoeConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, moe_intermediate_size=32,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        num_experts=4, num_experts_per_tok=2, max_position_embeddings=256,
        experts_implementation="eager", **extra,
    )  # fmt: skip
    torch.manual_seed(0)
    return transformers.Qwen3MoeForCausalLM(config).float()


def test_the_vocabulary_is_the_first_ids_the_added_ones_and_the_extra_ones():
    vocab = OutputVocab.of(SimpleNamespace(output_vocab=300, output_vocab_extra=EXTRA), VOCAB, added=[510, 511])
    assert vocab.ids.tolist() == [*range(300), 400, 450, 510, 511]
    tokens = torch.tensor([0, 299, 300, 400, 511, 450])
    rows = vocab.row_of(tokens)
    assert rows.tolist() == [0, 299, -1, 300, 303, 301]
    assert vocab.token_ids(rows[rows >= 0]).tolist() == [0, 299, 400, 511, 450]
    assert OutputVocab.of(SimpleNamespace(), VOCAB).ids is None  # unrestricted by default
    with pytest.raises(ValueError, match="output_vocab must be an integer >= 256"):
        OutputVocab.of(SimpleNamespace(output_vocab=10), VOCAB)


def test_logprobs_are_a_softmax_over_the_emittable_rows_with_their_gradients():
    model = tiny()
    vocab = OutputVocab.of(SimpleNamespace(output_vocab=300, output_vocab_extra=EXTRA), VOCAB)
    ids = torch.tensor([[5, 17, 299, 400, 3, 450, 12, 350]])  # 350 cannot be emitted
    got = token_logprobs(model, ids, torch.ones_like(ids), vocab=vocab, chunk_tokens=3)
    assert got[0, -1] == float("-inf")
    got[0, 1:-1].sum().backward()
    fast = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1][:, vocab.ids], -1)
    naive = logp[:-1].gather(-1, vocab.row_of(ids[0, 1:-1])[:, None]).squeeze(-1)
    assert torch.allclose(got[0, 1:-1], naive.detach(), atol=1e-5)
    naive.sum().backward()
    for mine, reference in zip(fast, (p.grad for p in model.parameters()), strict=True):
        assert (mine is None) == (reference is None)
        assert mine is None or torch.allclose(mine, reference, atol=1e-5)
    assert fast[0] is not None and torch.isfinite(fast[0]).all()  # the tied embedding / head


def test_the_backend_samples_only_emittable_ids_with_the_log_probs_training_computes():
    model = tiny(output_vocab=300, output_vocab_extra=EXTRA)
    options = HFInferenceOptions(device="cpu", threads=1)
    inf = HFInference.from_model(model, eos=0, max_context=256, options=options, seed=0)
    vocab = OutputVocab.of(model.config, VOCAB)
    prompt = [400, 401, 402, 403, 450, 7, 8]
    for version in (0, 1):  # the second time after a weight load: the head's rows follow it
        if version:
            inf.load_weights({k: v * 1.5 for k, v in model.state_dict().items()}, version)
        gen = inf.generate(prompt, Sampling(max_tokens=40, seed=3, temperature=1.5))
        assert gen.completion_ids and (vocab.row_of(torch.tensor(gen.completion_ids)) >= 0).all()
        ids = torch.tensor([prompt + gen.completion_ids])
        where = torch.zeros_like(ids, dtype=torch.bool)
        where[0, len(prompt) :] = True
        with torch.no_grad():
            scored = token_logprobs(inf.model, ids, torch.ones_like(ids), where=where, temperature=1.5, vocab=vocab)
        assert torch.allclose(scored[0, len(prompt) :], torch.tensor(gen.logprobs), atol=1e-4)


def test_the_warm_start_makes_its_demonstrations_replies_emittable():
    model = tiny(output_vocab=300)
    demos = [SimpleNamespace(prompt_ids=[1, 2, 480], completion_ids=[5, 470, 301])]
    cover_replies(model, demos)
    assert model.config.output_vocab_extra == [301, 470]  # not the prompt's 480
    unrestricted = tiny()
    cover_replies(unrestricted, demos)
    assert getattr(unrestricted.config, "output_vocab_extra", None) is None
