"""Rollout correction (legorl_embedded.objectives.correction): each method changes the gradient as its
definition says, on a constructed batch whose trainer/inference log-ratios are known."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from legorl_embedded.objectives.batch import PolicyBatch  # noqa: E402
from legorl_embedded.objectives.correction import correct  # noqa: E402
from legorl_embedded.objectives.correction_options import RolloutCorrection  # noqa: E402
from legorl_embedded.objectives.grpo import GRPO  # noqa: E402
from legorl_embedded.options import GRPOOptions, PPOOptions  # noqa: E402
from pydantic import ValidationError  # noqa: E402

RATIOS = [[3.0, 0.5], [1.1, 0.9]]
"""pi_train / pi_rollout per token: trial 0's product is 1.5, trial 1's 0.99."""
ADV = [1.0, -1.0]
N = 4


def batch(trial: list[int] | None = None) -> PolicyBatch:
    log_ratio = torch.tensor(RATIOS).log()
    mask = torch.ones(2, 2)
    rows = trial or [0, 1]
    seq_tokens = torch.tensor([float(sum(2 for r in rows if r == t)) for t in rows])
    return PolicyBatch(
        logprobs=torch.zeros(2, 2, requires_grad=True),
        inference_logprobs=-log_ratio,  # old = 0, so old - inf is the log-ratio
        mask=mask,
        advantages=torch.tensor(ADV),
        seq_tokens=seq_tokens,
        token_total=float(N),
        seq_total=float(len(set(rows))),
        old_logprobs=torch.zeros(2, 2),
        trial=torch.tensor(trial) if trial else None,
    )


def gradient(correction: RolloutCorrection | None, tis_cap: float | None = 2.0, trial: list[int] | None = None) -> list[float]:
    """d loss / d logp per token; with old = logp (ratio 1, no clipping) it is -A_i * w_t / N."""
    options = GRPOOptions(correction=correction) if correction is not None else GRPOOptions(tis_cap=tis_cap)
    b = batch(trial)
    loss, _ = GRPO(options).loss(b)
    loss.backward()
    return b.logprobs.grad.flatten().tolist()


def expected(weights: list[float]) -> list[float]:
    return [-ADV[i // 2] * w / N for i, w in enumerate(weights)]


@pytest.mark.parametrize(
    ("correction", "weights"),
    [
        # off, and token TIS (the plain tis_cap): min(rho_t, 2)
        (RolloutCorrection(is_level=None), [1, 1, 1, 1]),
        (RolloutCorrection(is_threshold=2.0), [2, 0.5, 1.1, 0.9]),
        # sequence TIS: one weight per trial, the product of its ratios, truncated
        (RolloutCorrection(is_level="sequence", is_threshold=1.2), [1.2, 1.2, 0.99, 0.99]),
        # IcePop: tokens outside [0.6, 2] weigh 0, the others their ratio
        (RolloutCorrection(is_threshold=(0.6, 2.0)), [0, 0, 1.1, 0.9]),
        # masked IS (token): tokens over the cap are dropped, not truncated
        (RolloutCorrection(is_threshold=2.0, reject=[{"mode": "token_k1", "high": 2.0}]), [0, 0.5, 1.1, 0.9]),
        # sequence MIS: a trial whose product ratio passes 1.2 is dropped whole
        (RolloutCorrection(is_level="sequence", is_threshold=2.0, reject=[{"mode": "seq_sum_k1", "high": 1.2}]),
         [0, 0, 0.99, 0.99]),
        # geometric-mean sequence mask over token TIS: trial 0's mean ratio sqrt(1.5) is outside
        (RolloutCorrection(reject=[{"mode": "seq_mean_k1", "low": 0.95, "high": 1.05}]), [0, 0, 1.1, 0.9]),
    ],
    ids=["off", "token-tis", "sequence-tis", "icepop", "token-mis", "sequence-mis", "geo-mean-mask"],
)
def test_each_method_weighs_the_gradient_as_defined(correction: RolloutCorrection, weights: list[float]) -> None:
    assert gradient(correction) == pytest.approx(expected(weights), rel=1e-5)


def test_tis_cap_is_the_token_tis_shorthand() -> None:
    assert gradient(None, tis_cap=2.0) == pytest.approx(gradient(RolloutCorrection(is_threshold=2.0)))
    assert gradient(None, tis_cap=None) == pytest.approx(expected([1, 1, 1, 1]))


def test_sequence_weights_span_every_segment_of_a_trial() -> None:
    """Two rows of one trial (a trajectory split by a history rewrite): one product over both."""
    got = gradient(RolloutCorrection(is_level="sequence", is_threshold=10.0), trial=[0, 0])
    product = 3.0 * 0.5 * 1.1 * 0.9
    assert got == pytest.approx([-ADV[i // 2] * product / N for i in range(4)], rel=1e-5)


def test_the_diagnostics_users_read() -> None:
    b = batch()
    log_ratio = torch.tensor(RATIOS).log()
    k3 = float((log_ratio.exp() - 1 - log_ratio).mean())
    plain = correct(b, b.old_logprobs, RolloutCorrection(is_level=None)).metrics
    assert plain["rollout_mismatch_k3"] == pytest.approx(k3)
    assert plain["rollout_ess"] == pytest.approx(1.0) and plain["rollout_masked_fraction"] == 0.0
    tis = correct(b, b.old_logprobs, RolloutCorrection(is_threshold=2.0)).metrics
    w = [2, 0.5, 1.1, 0.9]
    assert tis["rollout_ess"] == pytest.approx(sum(w) ** 2 / (4 * sum(x * x for x in w)))
    assert tis["tis_capped_fraction"] == 0.25 and tis["tis_weight_mean"] == pytest.approx(sum(w) / 4)
    icepop = correct(b, b.old_logprobs, RolloutCorrection(is_threshold=(0.6, 2.0))).metrics
    assert icepop["rollout_masked_fraction"] == 0.5


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValidationError, match="tis_cap or correction"):
        GRPOOptions(tis_cap=2.0, correction={"is_threshold": 3.0})
    with pytest.raises(ValidationError, match="low < high"):
        PPOOptions(correction={"is_threshold": [2.0, 1.0]})
    with pytest.raises(ValidationError, match="must be above low"):
        GRPOOptions(correction={"reject": [{"mode": "seq_mean_k1", "low": 1.1, "high": 1.0}]})
    with pytest.raises(ValidationError):
        GRPOOptions(correction={"reject": [{"mode": "token_k9", "high": 2.0}]})
