"""Shared-prefix scoring: the same log-probs and gradients as a full forward, routing replayed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from legorl_embedded.policy.logprobs import token_logprobs  # noqa: E402
from legorl_embedded.policy.prefix import shared_prefix_length  # noqa: E402
from legorl_embedded.policy.replay import RoutingReplay, routing_table  # noqa: E402
from legorl_embedded.policy.routing import RoutingRecorder  # noqa: E402
from test_embedded_replay import EXPERTS, LAYERS, K, one_thread, tiny_moe  # noqa: E402, F401 (autouse fixture)

PREFIX, WIDTH = 40, 52


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three right-padded rows sharing their first PREFIX ids; replies after position 44."""
    gen = torch.Generator().manual_seed(1)
    shared = torch.randint(0, 128, (PREFIX,), generator=gen)
    ids = torch.zeros(3, WIDTH, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for row, length in enumerate((WIDTH, WIDTH - 3, WIDTH - 6)):
        ids[row, :PREFIX] = shared
        ids[row, PREFIX:length] = torch.randint(0, 128, (length - PREFIX,), generator=gen)
        attn[row, :length] = 1
    reply = attn.bool().clone()
    reply[:, :44] = False
    return ids, attn, reply


def scored(model, ids, attn, reply, share: bool, replay: RoutingReplay | None = None):
    model.zero_grad(set_to_none=True)
    kwargs = {}
    if replay is not None:
        kwargs = {"same_routing": replay.same_routing(), "on_pass": replay.use}
    out = token_logprobs(model, ids, attn, where=reply, share_prefix=share, **kwargs)
    (out * reply).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.detach(), grads


def test_shared_prefix_gives_the_full_forwards_logprobs_and_gradients():
    model = tiny_moe()
    ids, attn, reply = batch()
    full, full_grads = scored(model, ids, attn, reply, share=False)
    shared, shared_grads = scored(model, ids, attn, reply, share=True)
    assert shared_prefix_length(ids, attn, reply.roll(-1, 1)) == PREFIX
    assert torch.count_nonzero(full) == reply[:, 1:].sum()
    torch.testing.assert_close(shared, full, rtol=1e-4, atol=1e-5)
    assert full_grads.keys() == shared_grads.keys()
    for name, grad in full_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, rtol=1e-3, atol=1e-5, msg=name)


def test_shared_prefix_runs_the_prefix_once(monkeypatch):
    model = tiny_moe()
    ids, attn, reply = batch()
    widths: list[tuple[int, int]] = []
    base_forward = model.base_model.forward

    def counting(*args, input_ids=None, **kwargs):
        widths.append(tuple(input_ids.shape))
        return base_forward(*args, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(model.base_model, "forward", counting)
    scored(model, ids, attn, reply, share=True)
    assert widths == [(1, PREFIX), (3, WIDTH - PREFIX)]


def test_prefix_stops_where_rows_differ_or_a_hidden_state_is_needed():
    ids, attn, reply = batch()
    needed = reply.roll(-1, 1)
    ids[2, 10] = (ids[2, 10] + 1) % 128
    assert shared_prefix_length(ids, attn, needed) == 0  # 10 < MIN_SHARED: not worth it
    ids, attn, reply = batch()
    needed[:, 35] = True
    assert shared_prefix_length(ids, attn, needed) == 35
    assert shared_prefix_length(ids[:1], attn[:1], needed[:1]) == 0  # one row: nothing to share


def test_replayed_routing_is_the_same_with_a_shared_prefix():
    model = tiny_moe()
    ids, attn, reply = batch()
    with torch.no_grad(), RoutingRecorder(model) as rec:
        model(input_ids=ids, attention_mask=attn)
        native = rec.pop().view(3, WIDTH, LAYERS, K)
    forced = (native + 1) % EXPERTS  # a routing the model would not choose
    forced[:, :PREFIX] = forced[:1, :PREFIX]  # recorded identically for the shared prompt
    rows = [[forced[r, p].tolist() if attn[r, p] else None for p in range(WIDTH)] for r in range(3)]

    def run(share: bool):
        table = routing_table(rows, WIDTH, LAYERS, K)
        with RoutingReplay(model, table) as replay:
            out, grads = scored(model, ids, attn, reply, share, replay)
        return out, grads, replay.counts()

    full, full_grads, full_counts = run(False)
    shared, shared_grads, shared_counts = run(True)
    torch.testing.assert_close(shared, full, rtol=1e-4, atol=1e-5)
    for name, grad in full_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, rtol=1e-3, atol=1e-5, msg=name)
    # the shared pass compares the prefix once instead of once per row
    assert shared_counts[1] == full_counts[1] - 2 * PREFIX * LAYERS


def test_prefix_is_not_shared_where_rows_recorded_different_routing():
    ids, attn, reply = batch()
    table = routing_table(
        [[[[r % EXPERTS, (r + 1) % EXPERTS]] * LAYERS if p == 20 else None for p in range(WIDTH)] for r in range(3)],
        WIDTH, LAYERS, K,
    )  # fmt: skip
    same = table.same_in_every_row()
    assert not bool(same[20]) and bool(same[19])
    assert shared_prefix_length(ids, attn, reply.roll(-1, 1), same) == 0
