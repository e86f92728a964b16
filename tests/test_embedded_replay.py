"""Routing replay: recorded experts are forced, the router keeps its gradient, checkpointing is safe."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from legorl_embedded.policy.logprobs import token_logprobs  # noqa: E402
from legorl_embedded.policy.replay import RoutingReplay, routing_table  # noqa: E402
from legorl_embedded.policy.routing import RoutingRecorder, find_routers  # noqa: E402

LAYERS, EXPERTS, K = 2, 4, 2


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_moe(seed: int = 0) -> torch.nn.Module:
    cfg = transformers.Qwen3MoeConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, moe_intermediate_size=32,
        num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        num_experts=EXPERTS, num_experts_per_tok=K, norm_topk_prob=True,
    )
    torch.manual_seed(seed)
    return transformers.Qwen3MoeForCausalLM(cfg).float()


def native_routing(model, ids) -> torch.Tensor:
    """``(B * T, layers, k)`` experts the model picks on its own."""
    with torch.no_grad(), RoutingRecorder(model) as rec:
        model(input_ids=ids)
        return rec.pop()


def different_experts(native: torch.Tensor) -> torch.Tensor:
    """For every token and layer, a top-k set that differs from the native one."""
    return (native + 1) % EXPERTS


IDS = torch.tensor([[3, 17, 99, 42, 7, 64], [5, 9, 11, 120, 2, 8]])


def as_rows(experts: torch.Tensor, known: list[list[bool]]) -> list[list]:
    per = experts.view(IDS.shape[0], IDS.shape[1], LAYERS, K).tolist()
    return [[r if ok else None for r, ok in zip(row, flags)] for row, flags in zip(per, known)]


KNOWN = [[False, False, True, True, True, True], [True, True, True, False, True, False]]


def test_replayed_routing_equals_recorded_and_unknown_tokens_route_natively():
    model = tiny_moe()
    native = native_routing(model, IDS)
    recorded = different_experts(native)
    table = routing_table(as_rows(recorded, KNOWN), IDS.shape[1], LAYERS, K)
    assert table.recorded == sum(map(sum, KNOWN))
    with torch.no_grad(), RoutingReplay(model, table) as replay, RoutingRecorder(model) as seen:
        model(input_ids=IDS)
        used = seen.pop()
    known = torch.tensor(KNOWN).flatten()
    assert torch.equal(used[known].sort(-1).values, recorded[known].sort(-1).values)
    # first layer, unknown tokens: nothing upstream was forced, so the native choice stands
    assert torch.equal(used[~known, 0].sort(-1).values, native[~known, 0].sort(-1).values)
    assert replay.counts() == (0, LAYERS * table.recorded), "forced sets all differ from native"


def test_replay_off_only_measures_agreement():
    model = tiny_moe()
    native = native_routing(model, IDS)
    mixed = native.clone()
    mixed[::2] = different_experts(native[::2])  # every other token disagrees, in all layers
    table = routing_table(as_rows(mixed, [[True] * 6] * 2), IDS.shape[1], LAYERS, K)
    with torch.no_grad(), RoutingReplay(model, table, replay=False) as replay, RoutingRecorder(model) as seen:
        model(input_ids=IDS)
        used = seen.pop()
    assert torch.equal(used, native)
    assert replay.counts() == (LAYERS * 6, LAYERS * 12)
    assert replay.differing_tokens().tolist() == [i % 2 == 0 for i in range(12)]


def test_a_token_differing_in_one_layer_counts_once_per_token():
    model = tiny_moe()
    native = native_routing(model, IDS)
    mixed = native.clone()
    mixed[1, 0] = different_experts(native[1, 0])  # token 1: first layer only
    mixed[4, LAYERS - 1] = different_experts(native[4, LAYERS - 1])  # token 4: last layer only
    mixed[7] = different_experts(native[7])  # token 7: every layer
    table = routing_table(as_rows(mixed, [[True] * 6] * 2), IDS.shape[1], LAYERS, K)
    with torch.no_grad(), RoutingReplay(model, table, replay=False) as replay:
        model(input_ids=IDS)
    assert replay.counts() == (LAYERS * 12 - 2 - LAYERS, LAYERS * 12)
    assert torch.nonzero(replay.differing_tokens()).flatten().tolist() == [1, 4, 7]
    assert RoutingReplay(model, table).differing_tokens() is None  # no forward yet


def test_replay_keeps_router_gradient_with_renormalised_gate_weights():
    model = tiny_moe()
    recorded = different_experts(native_routing(model, IDS))
    table = routing_table(as_rows(recorded, [[True] * 6] * 2), IDS.shape[1], LAYERS, K)
    gate = find_routers(model)[0]
    scores = {}

    def keep(_module, _inputs, outputs) -> None:
        scores.setdefault("replayed", outputs[:2])

    with RoutingReplay(model, table):
        gate.register_forward_hook(keep)  # after the replay hook: sees what it returned
        logp = token_logprobs(model, IDS, torch.ones_like(IDS))
        logp.sum().backward()
    logits, weights = scores["replayed"]
    expected = torch.softmax(logits.float(), -1).gather(-1, recorded[:, 0])
    assert torch.allclose(weights, expected / expected.sum(-1, keepdim=True), atol=1e-6)
    for router in find_routers(model):
        assert router.weight.grad is not None and router.weight.grad.abs().sum() > 0


def test_replay_under_gradient_checkpointing_matches_plain_backward():
    recorded = different_experts(native_routing(tiny_moe(), IDS))
    table = routing_table(as_rows(recorded, KNOWN), IDS.shape[1], LAYERS, K)
    results = []
    for checkpointing in (False, True):
        model = tiny_moe()
        if checkpointing:
            model.gradient_checkpointing_enable()
        model.train()
        with RoutingReplay(model, table) as replay:
            logp = token_logprobs(model, IDS, torch.ones_like(IDS))
            logp.sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((logp.detach(), grads, replay.counts()))
    (lp_a, g_a, c_a), (lp_b, g_b, c_b) = results
    assert torch.allclose(lp_a, lp_b, atol=1e-6) and c_a == c_b
    assert g_a.keys() == g_b.keys()
    assert all(torch.allclose(g_a[n], g_b[n], atol=1e-5) for n in g_a)


def test_table_rejects_routing_of_another_shape():
    with pytest.raises(ValueError, match="routing_replay: off"):
        routing_table([[[[0, 1, 2]] * LAYERS]], 1, LAYERS, K)


def test_dense_model_and_missing_table_are_no_ops():
    dense = transformers.Qwen3ForCausalLM(
        transformers.Qwen3Config(
            vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        )
    )
    with RoutingReplay(dense, routing_table([[None]], 1, 0, 0)) as replay:
        dense(input_ids=torch.tensor([[1]]))
    assert replay.routers == [] and replay.counts() == (0, 0)
    assert RoutingReplay(tiny_moe(), None).routers == []


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_consistency_benchmark_smoke(dtype):
    from legorl_embedded.training.bench_consistency import main

    figures = main(["--train-steps", "3", "--samples", "2", "--tokens", "8", "--scoring-dtype", dtype])
    assert figures["scoring_dtype"] == dtype and figures["scored_tokens"] == 16 and 0.0 < figures["routing_agreement"] <= 1.0
    assert len(figures["router_mismatch_per_layer"]) == 6 and figures["threads"] == 2
    assert 0.0 <= max(figures["router_mismatch_per_layer"]) <= figures["tokens_any_layer_differing"] <= 1.0
    assert figures["k3_replay"] >= 0.0 and -1.0 <= figures["pearson_replay"] <= 1.0


def test_consistency_benchmark_refuses_completions_longer_than_the_context(capsys):
    from legorl_embedded.training.bench_consistency import main

    with pytest.raises(SystemExit):
        main(["--tokens", "500"])
    assert "at most 464" in capsys.readouterr().err
