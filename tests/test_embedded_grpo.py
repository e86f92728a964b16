"""GRPO objective, token log-probs and training rows of the embedded plugin (tiny models, CPU)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from legorl_embedded import plugin  # noqa: E402
from legorl_embedded.objectives.batch import PolicyBatch, build_rows  # noqa: E402
from legorl_embedded.objectives.grpo import GRPO, GRPOOptions  # noqa: E402
from legorl_embedded.policy.logprobs import _HeadLogprobs, token_logprobs  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from lego_rl.data import Segment, Trajectory, TrialResult  # noqa: E402
from lego_rl.registry import Registry  # noqa: E402


def tiny_model(seed: int = 0) -> torch.nn.Module:
    cfg = transformers.Qwen3MoeConfig(
        vocab_size=512,
        hidden_size=32,
        intermediate_size=64,
        moe_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        num_experts=4,
        num_experts_per_tok=2,
    )
    torch.manual_seed(seed)
    return transformers.Qwen3MoeForCausalLM(cfg).float()


def trial(reward: float, segments: list[Segment] | None = None, tid: str = "t") -> TrialResult:
    traj = Trajectory(session=tid, segments=segments) if segments is not None else None
    return TrialResult(trial_id=tid, task="task", reward=reward, trajectory=traj)


def segment(prompt: list[int], completion: list[int], lps: list[float]) -> Segment:
    return Segment(
        ids=prompt + completion,
        loss_mask=[0] * len(prompt) + [1] * len(completion),
        logprobs=[0.0] * len(prompt) + lps,
    )


def make_batch(logp: torch.Tensor, adv: list[float], **kw) -> PolicyBatch:
    mask = kw.pop("mask", torch.ones_like(logp))
    return PolicyBatch(
        logprobs=logp,
        inference_logprobs=kw.pop("inference_logprobs", logp.detach().clone()),
        mask=mask,
        advantages=torch.tensor(adv),
        seq_tokens=kw.pop("seq_tokens", mask.sum(1)),
        token_total=float(mask.sum()),
        seq_total=float(len(adv)),
        **kw,
    )


# ------------------------------------------------------------------ advantages


def test_advantages_normalised_by_group_std():
    adv = GRPO(GRPOOptions()).advantages([trial(1), trial(0), trial(0), trial(1)])
    std = math.sqrt(4 * 0.25 / 3)
    assert adv == pytest.approx([0.5 / std, -0.5 / std, -0.5 / std, 0.5 / std], rel=1e-5)


def test_dr_grpo_advantages_are_only_centred():
    adv = GRPO(GRPOOptions(normalize_std=False)).advantages(
        [trial(1), trial(0), trial(0), trial(0)]
    )
    assert adv == pytest.approx([0.75, -0.25, -0.25, -0.25])


@pytest.mark.parametrize("rewards", [[1, 1, 1], [0, 0], [0.5]])
def test_group_whose_rewards_agree_gets_zero_advantages(rewards):
    assert GRPO(GRPOOptions()).advantages([trial(r) for r in rewards]) == [0.0] * len(rewards)


# ------------------------------------------------------------------ loss


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_loss_step_moves_sampled_tokens_logprob_with_advantage(sign):
    model = tiny_model()
    ids = torch.tensor([[5, 17, 99, 3, 250, 7]])
    attn = torch.ones_like(ids)
    mask = torch.tensor([[0, 0, 0, 1, 1, 1]], dtype=torch.float32)
    with torch.no_grad():
        before = token_logprobs(model, ids, attn)
    logp = token_logprobs(model, ids, attn)
    loss, metrics = GRPO(GRPOOptions()).loss(
        make_batch(logp, [sign], mask=mask, inference_logprobs=before * mask)
    )
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.05 * p.grad
        after = token_logprobs(model, ids, attn)
    change = ((after - before) * mask).sum().item()
    assert sign * change > 0
    assert metrics["tokens"] == 3
    assert metrics["tis_weight_mean"] == pytest.approx(1.0)
    assert metrics["clip_fraction"] == 0.0


@pytest.mark.parametrize(
    ("adv", "log_ratio", "clipped"),
    [
        (1.0, 0.5, True),
        (1.0, 0.1, False),
        (-1.0, -0.5, True),
        (-1.0, 0.5, False),
        (1.0, -0.5, False),
    ],
)
def test_ratio_outside_clip_range_in_advantage_direction_gives_no_gradient(adv, log_ratio, clipped):
    logp = torch.zeros(1, 4, requires_grad=True)
    old = torch.full((1, 4), -log_ratio)
    loss, metrics = GRPO(GRPOOptions()).loss(make_batch(logp, [adv], old_logprobs=old))
    loss.backward()
    assert metrics["clip_fraction"] == (1.0 if clipped else 0.0)
    assert (logp.grad.abs().sum().item() == 0.0) == clipped


def test_tis_weight_is_capped_and_can_be_disabled():
    logp = torch.zeros(1, 2, requires_grad=True)
    inference = torch.tensor([[-5.0, -0.1]])  # trainer thinks both more likely than sampled
    capped, m = GRPO(GRPOOptions(tis_cap=2.0)).loss(
        make_batch(logp, [1.0], inference_logprobs=inference)
    )
    plain, m_plain = GRPO(GRPOOptions(tis_cap=None)).loss(
        make_batch(logp, [1.0], inference_logprobs=inference)
    )
    w2 = math.exp(0.1)
    assert m["tis_weight_mean"] == pytest.approx((2.0 + w2) / 2, rel=1e-5)
    assert capped.item() == pytest.approx(-(2.0 + w2) / 2, rel=1e-5)
    assert plain.item() == pytest.approx(-1.0) and m_plain["tis_weight_mean"] == 1.0
    assert m["tis_capped_fraction"] == 0.5 and m_plain["tis_capped_fraction"] == 0.0


def test_aggregations_weigh_tokens_or_trials():
    logp = torch.zeros(2, 4, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.float32)
    token, _ = GRPO(GRPOOptions()).loss(make_batch(logp, [1.0, -1.0], mask=mask))
    seq, _ = GRPO(GRPOOptions(aggregation="seq-mean-token-mean")).loss(
        make_batch(logp, [1.0, -1.0], mask=mask)
    )
    assert token.item() == pytest.approx((-4 + 1) / 5)
    assert seq.item() == pytest.approx((-1 + 1) / 2)


def test_kl_penalty_needs_reference_logprobs():
    opt = GRPO(GRPOOptions(kl_coef=0.1))
    assert opt.needs_reference and not GRPO(GRPOOptions()).needs_reference
    logp = torch.zeros(1, 3, requires_grad=True)
    with pytest.raises(ValueError, match="kl_coef"):
        opt.loss(make_batch(logp, [0.0]))
    loss, metrics = opt.loss(make_batch(logp, [0.0], ref_logprobs=torch.full((1, 3), -0.2)))
    assert metrics["kl_ref"] == pytest.approx(math.exp(-0.2) - 1 + 0.2, rel=1e-5)
    assert loss.item() == pytest.approx(0.1 * metrics["kl_ref"], rel=1e-5)


def test_grpo_registers_with_strict_options():
    registry = Registry()
    registry.add_module(plugin, name="embedded-test")
    built = registry.build(
        "optimizer", "grpo", {"clip_high": 0.3, "aggregation": "seq-mean-token-mean"}
    )
    assert isinstance(built, GRPO) and built.options.clip_high == 0.3
    with pytest.raises(ValidationError):
        registry.build("optimizer", "grpo", {"clip_hihg": 0.3})


# ------------------------------------------------------------------ token log-probs


def naive_logprobs(model, ids, attn, temperature=1.0):
    logits = model(input_ids=ids, attention_mask=attn).logits.float() / temperature
    picked = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    return torch.cat([torch.zeros(ids.shape[0], 1), picked], 1) * attn


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_token_logprobs_match_naive_log_softmax_values_and_grads(temperature):
    model = tiny_model(1)
    ids = torch.randint(0, 512, (3, 9), generator=torch.Generator().manual_seed(0))
    attn = torch.ones_like(ids)
    attn[1, 6:] = 0
    attn[2, 4:] = 0
    naive = naive_logprobs(model, ids, attn, temperature)
    fast = token_logprobs(model, ids, attn, temperature=temperature, chunk_tokens=5)
    assert torch.allclose(fast, naive, atol=1e-5)
    assert fast[:, 0].abs().sum() == 0 and fast[1, 6:].abs().sum() == 0

    naive.sum().backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    fast.sum().backward()
    for p, g in zip(model.parameters(), expected, strict=True):
        assert torch.allclose(p.grad, g, atol=1e-5)


def test_token_logprobs_where_limits_positions():
    model = tiny_model(2)
    ids = torch.randint(0, 512, (2, 6), generator=torch.Generator().manual_seed(1))
    attn = torch.ones_like(ids)
    where = torch.zeros_like(ids, dtype=torch.bool)
    where[0, 3] = where[1, 5] = True
    with torch.no_grad():
        full = token_logprobs(model, ids, attn)
        some = token_logprobs(model, ids, attn, where=where)
    assert torch.allclose(some, full * where, atol=1e-6)
    assert (some != 0).sum() == 2


# ------------------------------------------------------------------ rows


def test_build_rows_copies_segments_and_aligns_masked_logprobs():
    a1 = segment([1, 2, 3], [4, 5], [-0.5, -0.25])
    a2 = segment([1, 2, 3, 4, 5, 6], [7], [-1.5])
    b1 = segment([9], [8, 7, 6], [-0.1, -0.2, -0.3])
    first_sampled = Segment(ids=[11, 12], loss_mask=[1, 1], logprobs=[-9.0, -0.7])
    groups = [
        [trial(1.0, [a1, a2], "a"), trial(0.0, [b1], "b")],
        [trial(1.0, None, "no-traj"), trial(0.0, [], "empty"), trial(0.0, [first_sampled], "c")],
    ]
    rows = build_rows(groups, [[0.5, -0.5], [0.0, 0.0, 0.0]])

    assert len(rows) == 4 and rows.skipped == 2 and rows.trials == 3
    assert rows.ids[0].tolist() == [1, 2, 3, 4, 5, 0, 0]
    assert rows.lengths.tolist() == [5, 7, 4, 2]
    assert rows.mask[0].tolist() == [0, 0, 0, 1, 1, 0, 0]
    assert rows.logprobs[0].tolist() == [0, 0, 0, -0.5, -0.25, 0, 0]
    assert rows.logprobs[1, 6].item() == -1.5
    assert rows.mask[3].tolist()[:2] == [0, 1], "first token of a row is never trained"
    assert rows.logprobs[3, :2].tolist() == pytest.approx([0.0, -0.7])
    assert rows.advantages.tolist() == [0.5, 0.5, -0.5, 0.0]
    assert rows.trial.tolist() == [0, 0, 1, 2]
    assert rows.seq_tokens.tolist() == [3, 3, 3, 1]
    assert rows.trained_tokens == 7
    assert rows.attention_mask[2].tolist() == [1, 1, 1, 1, 0, 0, 0]
    for r, seg in enumerate([a1, a2, b1]):
        on = rows.mask[r].bool()
        assert rows.ids[r, : len(seg)].tolist() == seg.ids
        assert rows.logprobs[r][on].tolist() == pytest.approx(
            [lp for lp, m in zip(seg.logprobs, seg.loss_mask, strict=True) if m]
        )


def test_build_rows_trains_subagents_only_when_asked():
    result = trial(1.0, [segment([1, 2], [3], [-0.5])], "main")
    result.subagents = [Trajectory(session="main.sub1", subagent=True, segments=[segment([7], [8, 9], [-0.1, -0.2])])]
    assert len(build_rows([[result]], [[0.5]])) == 1
    rows = build_rows([[result]], [[0.5]], subagents=True)
    assert len(rows) == 2 and rows.trials == 1
    assert rows.ids[1].tolist()[:3] == [7, 8, 9] and rows.advantages.tolist() == [0.5, 0.5]
    assert rows.seq_tokens.tolist() == [3, 3]  # the trial's tokens: main and sub-agent together
    alone = TrialResult(trial_id="s", task="task", subagents=result.subagents)
    assert len(build_rows([[alone]], [[1.0]], subagents=True)) == 1


def test_build_rows_rejects_misaligned_segment():
    bad = Segment(ids=[1, 2, 3], loss_mask=[0, 1, 1], logprobs=[0.0, -1.0])
    with pytest.raises(ValueError, match="trial x: .*align"):
        build_rows([[trial(1.0, [bad], "x")]], [[1.0]])


def test_micro_batches_cover_rows_within_token_budget():
    segs = [segment([1] * n, [2, 3], [-1.0, -1.0]) for n in (1, 9, 3, 20, 2)]
    rows = build_rows([[trial(1.0, [s], str(i)) for i, s in enumerate(segs)]], [[1.0] * 5])
    micro = list(rows.micro_batches(24))
    assert sum(len(m) for m in micro) == 5
    assert sum(m.trained_tokens for m in micro) == rows.trained_tokens
    for m in micro:
        assert m.ids.shape[1] == int(m.lengths.max())
        assert m.ids.numel() <= 24 or m.trials == 1


def test_token_logprobs_cut_to_tokenizer_vocab():
    model = tiny_model(3)
    ids = torch.randint(0, 400, (2, 5), generator=torch.Generator().manual_seed(2))
    attn = torch.ones_like(ids)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[..., :400]
        expected = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        cut = token_logprobs(model, ids, attn, vocab=400)
    assert torch.allclose(cut[:, 1:], expected, atol=1e-5)


def test_chunked_head_with_bias_matches_autograd():
    gen = torch.Generator().manual_seed(4)
    states = torch.randn(7, 6, generator=gen, requires_grad=True)
    weight = torch.randn(11, 6, generator=gen, requires_grad=True)
    bias = torch.randn(11, generator=gen, requires_grad=True)
    targets = torch.randint(0, 11, (7,), generator=gen)
    upstream = torch.randn(7, generator=gen)
    naive = (
        torch.log_softmax((states @ weight.T + bias) / 0.8, -1)
        .gather(-1, targets[:, None])
        .squeeze(-1)
    )
    torch.autograd.backward(naive, upstream)
    expected = [t.grad.clone() for t in (states, weight, bias)]
    for t in (states, weight, bias):
        t.grad = None
    fast = _HeadLogprobs.apply(states, weight, bias, targets, 0.8, 3)
    torch.autograd.backward(fast, upstream)
    assert torch.allclose(fast, naive, atol=1e-5)
    for t, g in zip((states, weight, bias), expected, strict=True):
        assert torch.allclose(t.grad, g, atol=1e-5)
