"""Routing replay in verl's actor on the CPU (legorl_verl.cpu.engine): the recorded experts of a
verl micro-batch (nested, as verl's batch carries them) force the routers of the forward pass."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")

import torch
from legorl_embedded.policy.replay import RoutingReplay
from legorl_embedded.policy.routing import RoutingRecorder
from legorl_verl.cpu.engine import routing_table
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

LAYERS, EXPERTS, K = 2, 4, 2


def tiny_moe() -> Qwen3MoeForCausalLM:
    torch.manual_seed(0)
    config = Qwen3MoeConfig(
        vocab_size=64, hidden_size=32, intermediate_size=32, moe_intermediate_size=16, num_hidden_layers=LAYERS,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, num_experts=EXPERTS, num_experts_per_tok=K,
    )
    return Qwen3MoeForCausalLM(config).eval()


def nested(rows: list[torch.Tensor]) -> torch.Tensor:
    return torch.nested.as_nested_tensor(rows, layout=torch.jagged)


def test_recorded_experts_replace_the_routers_choice_and_padding_routes_natively() -> None:
    model = tiny_moe()
    lengths = [5, 3]
    ids = [torch.randint(1, 64, (n,)) for n in lengths]
    padded = torch.zeros(2, max(lengths), dtype=torch.long)
    for row, seq in enumerate(ids):
        padded[row, : len(seq)] = seq
    with torch.no_grad(), RoutingRecorder(model) as native_rec:
        model(input_ids=padded)
        native = native_rec.pop()  # (B*T, layers, k)
    # record the two experts each router did NOT choose, except the last token of row 0 (no record)
    chosen = torch.zeros(native.shape[0], LAYERS, EXPERTS, dtype=torch.bool)
    chosen.scatter_(-1, native.long(), True)
    others = (~chosen).nonzero()[:, -1].view(native.shape[0], LAYERS, EXPERTS - K)
    recorded = others.view(2, max(lengths), LAYERS, K).clone()
    recorded[0, 4] = 0  # an all-zero row: no record
    table = routing_table({
        "input_ids": nested(ids),
        "routed_experts": nested([recorded[row, :n].to(torch.int16) for row, n in enumerate(lengths)]),
    })
    assert table is not None and table.width == max(lengths)
    assert table.recorded == sum(lengths) - 1
    with torch.no_grad(), RoutingReplay(model, table) as replay, RoutingRecorder(model) as used_rec:
        model(input_ids=padded)
        used = used_rec.pop().view(2, max(lengths), LAYERS, K).sort(-1).values
    forced = recorded.sort(-1).values
    native = native.view(2, max(lengths), LAYERS, K).sort(-1).values
    for row, n in enumerate(lengths):
        for pos in range(max(lengths)):
            want = forced[row, pos] if pos < n and not (row == 0 and pos == 4) else native[row, pos]
            assert torch.equal(used[row, pos], want), (row, pos)
    agreeing, compared = replay.counts()
    assert (agreeing, compared) == (0, LAYERS * table.recorded)  # the record is never the router's own choice


def test_a_micro_batch_without_routing_has_no_table() -> None:
    assert routing_table({"input_ids": nested([torch.tensor([1, 2])])}) is None
