"""GRPO, PPO and GSPO losses against hand-computed values; segment-aware weighting; consistency."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from legorl_embedded import plugin  # noqa: E402
from legorl_embedded.objectives.batch import PolicyBatch  # noqa: E402
from legorl_embedded.objectives.consistency import Consistency  # noqa: E402
from legorl_embedded.objectives.grpo import GRPO  # noqa: E402
from legorl_embedded.objectives.gspo import GSPO  # noqa: E402
from legorl_embedded.objectives.ppo import PPO  # noqa: E402
from legorl_embedded.options import GRPOOptions, GSPOOptions, PPOOptions  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from lego_rl.data import TrialResult  # noqa: E402
from lego_rl.registry import Registry  # noqa: E402

e = math.exp
# Two trials of two trained tokens; the trainer's current log-probs are all 0.
OLD = [[-0.5, 0.3], [-1.5, 0.0]]  # ratio = exp(0 - old) = [[e^.5, e^-.3], [e^1.5, 1]]
INF = [[-0.1, 0.0], [-2.0, 0.1]]  # old - inf = [[-.4, .3], [.5, -.1]]: TIS weights e^that
ADV = [1.0, -1.0]


def batch(
    rows: int = 2, *, old=OLD, inf=INF, adv=ADV, trial=None, seq_tokens=None, mask=None
) -> PolicyBatch:
    logp = torch.zeros(rows, len(old[0]), requires_grad=True)
    mask = torch.ones(rows, len(old[0])) if mask is None else torch.tensor(mask, dtype=torch.float32)
    return PolicyBatch(
        logprobs=logp,
        inference_logprobs=torch.tensor(inf),
        mask=mask,
        advantages=torch.tensor(adv),
        seq_tokens=mask.sum(1) if seq_tokens is None else torch.tensor(seq_tokens, dtype=torch.float32),
        token_total=float(mask.sum()),
        seq_total=float(len(set(trial))) if trial else float(rows),
        old_logprobs=torch.tensor(old),
        trial=torch.tensor(trial) if trial else None,
    )


def grad_of(objective, b: PolicyBatch) -> tuple[float, dict[str, float], list[float]]:
    loss, metrics = objective.loss(b)
    loss.backward()
    return loss.item(), metrics, b.logprobs.grad.flatten().tolist()


# ------------------------------------------------------------------ GRPO


def test_grpo_reference_values():
    loss, m, grad = grad_of(GRPO(GRPOOptions(clip_low=0.2, clip_high=0.28, tis_cap=2.0)), batch())
    # row 0 (A=1): token 0 clipped at 1.28, token 1 unclipped; row 1 (A=-1): max keeps the ratio
    per_token = [-1.28 * e(-0.4), -e(-0.3) * e(0.3), e(1.5) * e(0.5), 1.0 * e(-0.1)]
    assert loss == pytest.approx(sum(per_token) / 4, rel=1e-6)
    assert grad == pytest.approx([0.0, -0.25, e(2.0) / 4, e(-0.1) / 4], rel=1e-6)
    assert m["clip_fraction"] == 0.25 and m["tokens"] == 4
    assert m["tis_weight_mean"] == pytest.approx((e(-0.4) + e(0.3) + e(0.5) + e(-0.1)) / 4, rel=1e-6)
    seq, _ = GRPO(GRPOOptions(aggregation="seq-mean-token-mean")).loss(batch())
    assert seq.item() == pytest.approx(((per_token[0] + per_token[1]) / 2 + (per_token[2] + per_token[3]) / 2) / 2, rel=1e-6)


# ------------------------------------------------------------------ PPO


def test_ppo_reference_values_with_dual_clip():
    loss, m, grad = grad_of(PPO(PPOOptions(clip=0.2, dual_clip=3.0, tis_cap=2.0)), batch())
    # row 1 token 0: ratio e^1.5 with A=-1 is bounded by the dual clip at 3
    per_token = [-1.2 * e(-0.4), -1.0, 3.0 * e(0.5), e(-0.1)]
    assert loss == pytest.approx(sum(per_token) / 4, rel=1e-6)
    assert grad == pytest.approx([0.0, -0.25, 0.0, e(-0.1) / 4], rel=1e-6)
    assert m["dual_clip_fraction"] == 0.25 and m["clip_fraction"] == 0.25
    plain, _ = PPO(PPOOptions(clip=0.2, dual_clip=None, tis_cap=None)).loss(batch())
    assert plain.item() == pytest.approx((-1.2 - e(-0.3) + e(1.5) + 1.0) / 4, rel=1e-6)


def test_ppo_baselines():
    group = [TrialResult(trial_id=str(i), task="t", reward=r) for i, r in enumerate([1, 0, 0, 1])]
    assert PPO(PPOOptions()).advantages(group) == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3])
    assert PPO(PPOOptions(baseline="group-mean")).advantages(group) == [0.5, -0.5, -0.5, 0.5]
    assert PPO(PPOOptions()).advantages(group[:1]) == [0.0]


# ------------------------------------------------------------------ GSPO


def test_gspo_reference_values():
    opts = GSPOOptions(clip_low=0.2, clip_high=0.2, tis_cap=2.0)
    loss, m, grad = grad_of(GSPO(opts), batch())
    # trial 0: s = e^mean(.5, -.3) = e^.1 (inside the clip), w = e^mean(-.4, .3) = e^-.05
    # trial 1: s = e^mean(1.5, 0) = e^.75 (A<0: max keeps s), w = e^mean(.5, -.1) = e^.2
    per_seq = [-e(0.1) * e(-0.05), e(0.75) * e(0.2)]
    assert loss == pytest.approx(sum(per_seq) / 2, rel=1e-6)
    # d s_i / d logp_t = s_i / |y_i|
    assert grad == pytest.approx([per_seq[0] / 4] * 2 + [per_seq[1] / 4] * 2, rel=1e-6)
    assert m["ratio_mean"] == pytest.approx((e(0.1) + e(0.75)) / 2, rel=1e-6)
    assert m["clip_fraction"] == 0.0
    tight, m_tight = GSPO(GSPOOptions(tis_cap=None)).loss(batch())  # default clip 3e-4 / 4e-4
    assert tight.item() == pytest.approx((-(1 + 4e-4) + e(0.75)) / 2, rel=1e-6)
    assert m_tight["clip_fraction"] == 0.5


# ------------------------------------------------------------------ segment-aware weighting


@pytest.mark.parametrize(
    "objective",
    [
        GRPO(GRPOOptions()),
        GRPO(GRPOOptions(aggregation="seq-mean-token-mean")),
        PPO(PPOOptions(aggregation="seq-mean-token-mean")),
        GSPO(GSPOOptions(clip_low=0.2, clip_high=0.2)),
    ],
    ids=["grpo-token", "grpo-seq", "ppo-seq", "gspo"],
)
def test_a_trial_split_into_segments_weighs_what_it_weighs_whole(objective):
    whole, _ = objective.loss(batch())
    # trial 0 arrives as two one-token segments: rows 0 and 1, the advantage broadcast to both
    split = batch(
        3,
        old=[[0.0, OLD[0][0]], [0.0, OLD[0][1]], OLD[1]],
        inf=[[0.0, INF[0][0]], [0.0, INF[0][1]], INF[1]],
        adv=[ADV[0], ADV[0], ADV[1]],
        mask=[[0, 1], [0, 1], [1, 1]],
        trial=[0, 0, 1],
        seq_tokens=[2, 2, 2],
    )
    loss, _ = objective.loss(split)
    assert loss.item() == pytest.approx(whole.item(), rel=1e-6)


# ------------------------------------------------------------------ registration


@pytest.mark.parametrize(
    ("name", "cls", "good", "bad"),
    [("gspo", GSPO, {"clip_high": 1e-3}, {"clip": 0.2}), ("ppo", PPO, {"dual_clip": 2.0}, {"dual_clip": 0.5})],
)
def test_objectives_register_with_strict_options(name, cls, good, bad):
    registry = Registry()
    registry.add_module(plugin, name="embedded-test")
    built = registry.build("optimizer", name, good)
    assert isinstance(built, cls) and not built.needs_reference
    with pytest.raises(ValidationError):
        registry.build("optimizer", name, bad)


def test_kl_penalty_needs_reference_in_every_objective():
    for objective in (PPO(PPOOptions(kl_coef=0.1)), GSPO(GSPOOptions(kl_coef=0.1))):
        assert objective.needs_reference
        with pytest.raises(ValueError, match="kl_coef"):
            objective.loss(batch())


# ------------------------------------------------------------------ consistency metrics


def test_consistency_metrics_reference_values_accumulate_over_micro_batches():
    trainer = torch.tensor([[-1.0, -0.5, -2.0, -0.1]])
    inference = torch.tensor([[-1.2, -0.5, -1.6, -3.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # the last token is not trained
    whole = Consistency()
    whole.add(trainer, inference, mask)
    parts = Consistency()
    parts.add(trainer[:, :2], inference[:, :2], mask[:, :2])
    parts.add(trainer[:, 2:], inference[:, 2:], mask[:, 2:])
    parts.add_routing(3, 4, recorded=2, tokens=8)
    d = [0.2, 0.0, -0.4]  # trainer - inference on trained tokens
    m = whole.metrics()
    assert m["logp_diff_abs"] == pytest.approx(0.2) and m["logp_diff_max"] == pytest.approx(0.4)
    assert m["k3_kl"] == pytest.approx(sum(e(x) - 1 - x for x in d) / 3)
    assert m["ratio_outside"] == pytest.approx(1 / 3)  # e^-0.4 = 0.67 < 0.8; e^0.2 = 1.22 inside
    probs = torch.tensor([[e(-1.2), e(-0.5), e(-1.6)], [e(-1.0), e(-0.5), e(-2.0)]])
    assert m["prob_pearson"] == pytest.approx(torch.corrcoef(probs)[0, 1].item(), rel=1e-6)
    assert "routing_agreement" not in m
    p = parts.metrics()
    assert {k: p[k] for k in m} == pytest.approx(m)
    assert p["routing_agreement"] == 0.75 and p["routing_recorded_share"] == 0.25
