"""The warm start trains only the vocabulary rows its demonstrations reach, with the same
result as training the whole 151k-row matrices."""

from __future__ import annotations

import copy

import pytest
import torch

from lego_rl.engine.warmstart import Demonstration
from lego_rl.spec.models import ModelSpec, WarmstartSpec


def _setup(tied: bool) -> tuple[torch.nn.Module, list[Demonstration], object]:
    from legorl_embedded.policy.model import build_model
    from legorl_embedded.policy.output_vocab import model_output_vocab
    from legorl_embedded.policy.tokenizer import load_tokenizer

    tokenizer = load_tokenizer()
    config = {"output_vocab": 1024, "tie_word_embeddings": tied}
    model = build_model(ModelSpec(name="tiny", max_context=256, config=config), tokenizer, seed=0).float()
    prompt = tokenizer.encode("fix the bug in calc.py, then run the tests", add_special_tokens=False)
    replies = ["sed -i s/-/+/ calc.py", "python3 tests/run_tests.py", "Done."]
    demos = [Demonstration("t", prompt[: 4 + i], tokenizer.encode(r, add_special_tokens=False)) for i, r in enumerate(replies)]
    return model, demos, model_output_vocab(model, tokenizer)


@pytest.mark.parametrize("tied", [True, False])
def test_training_the_reached_rows_equals_training_every_row(tied: bool) -> None:
    from legorl_embedded.training.supervise import fit, pack, supervise_model

    compact, demos, vocab = _setup(tied)
    full = copy.deepcopy(compact)
    before = copy.deepcopy(compact.state_dict())
    plan = WarmstartSpec(epochs=3, lr=1e-2, batch_tokens=64)
    supervise_model(compact, demos, plan, vocab=vocab, seed=0, log=lambda _: None)
    fit(full, pack(demos, plan.batch_tokens), plan, vocab, 0, lambda _: None)

    embed = compact.get_input_embeddings()
    assert embed.weight.shape[0] > 150_000  # the full matrices are back in the model
    assert (compact.get_output_embeddings().weight is embed.weight) == tied
    assert embed.padding_idx == full.get_input_embeddings().padding_idx
    trained, reference = compact.state_dict(), full.state_dict()
    assert trained.keys() == reference.keys()
    for name, value in trained.items():
        torch.testing.assert_close(value, reference[name], rtol=1e-5, atol=1e-6, msg=name)
    moved = (trained["model.embed_tokens.weight"] != before["model.embed_tokens.weight"]).any(1)
    assert 0 < int(moved.sum()) < 2000  # the reached rows moved, the other ~150k did not


def test_an_unrestricted_head_trains_the_matrices_themselves() -> None:
    from legorl_embedded.policy.output_vocab import OutputVocab
    from legorl_embedded.training.trained_rows import trained_rows

    model, _, _ = _setup(tied=True)
    weight = model.get_input_embeddings().weight
    with trained_rows(model, [torch.arange(10)], OutputVocab(weight.shape[0])) as rows:
        assert rows is None and model.get_input_embeddings().weight is weight
