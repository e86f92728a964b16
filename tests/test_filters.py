"""Difficulty filters: group-variance (online) and pass-rate (offline, from probe results)."""

from __future__ import annotations

from pathlib import Path

import pytest
from legorl_std.filters import (
    GroupVarianceOptions,
    PassRateOptions,
    group_variance,
    pass_rate,
)
from pydantic import ValidationError

from lego_rl.data import Attribution, Termination, TrialResult
from lego_rl.engine.passrates import PassRates
from lego_rl.kinds import Task
from lego_rl.registry import BuildContext

TASKS = [Task(name=n, path=Path("/x"), instruction="i") for n in ("easy", "mid", "hard", "new")]


def trial(reward: float, infra: bool = False) -> TrialResult:
    termination = Termination.SANDBOX_ERROR if infra else Termination.COMPLETED
    attribution = Attribution.INFRASTRUCTURE if infra else Attribution.NONE
    return TrialResult(
        trial_id="t", task="mid", reward=reward, termination=termination, attribution=attribution
    )


def test_group_variance_keeps_only_groups_with_disagreeing_rewards() -> None:
    f = group_variance(GroupVarianceOptions(max_extra=0.5), BuildContext())
    assert f.resample_budget == 0.5
    assert f.keep_group([trial(1.0), trial(0.0)])
    assert not f.keep_group([trial(1.0), trial(1.0)])
    assert not f.keep_group([trial(0.0), trial(0.0)])
    # an infrastructure failure's 0 is not a policy outcome: the group is still uniform
    assert not f.keep_group([trial(1.0), trial(0.0, infra=True), trial(1.0)])
    assert f.select_tasks(TASKS) == TASKS


def probed(tmp_path: Path) -> Path:
    rates = PassRates("p")
    for name, successes in (("easy", 8), ("mid", 2), ("hard", 0)):
        for i in range(8):
            rates.add(name, i < successes)
    path = tmp_path / "rates.json"
    rates.save(path)
    return path


def test_pass_rate_keeps_the_band_and_reads_stored_rates(tmp_path: Path) -> None:
    path = probed(tmp_path)
    f = pass_rate(PassRateOptions(file=str(path)), BuildContext(spec_dir=tmp_path))
    f.policy = "p"
    assert f.preflight() == []
    assert [t.name for t in f.select_tasks(TASKS)] == ["mid", "new"]
    f.options = PassRateOptions(file=str(path), unprobed="drop")
    assert [t.name for t in f.select_tasks(TASKS)] == ["mid"]
    assert f.keep_group([trial(1.0), trial(1.0)]), "offline filter keeps groups unless asked"
    online = pass_rate(PassRateOptions(file=str(path), resample_uniform=True), BuildContext())
    assert not online.keep_group([trial(1.0), trial(1.0)]) and online.resample_budget == 1.0


def test_pass_rate_without_probe_results_refuses_to_start(tmp_path: Path) -> None:
    f = pass_rate(PassRateOptions(file="missing.json"), BuildContext(spec_dir=tmp_path))
    (problem,) = f.preflight()
    assert "legorl probe" in problem.fix and problem.fatal
    with pytest.raises(ValidationError, match="min_passes"):
        PassRateOptions(min_passes=4, max_passes=3)


def test_stored_rates_are_reused_for_the_same_policy_only(tmp_path: Path) -> None:
    path = probed(tmp_path)
    same = PassRates.load(path, "p")
    assert same.missing("mid", 8) == 0 and same.missing("new", 8) == 8
    assert same.rate("mid") == 0.25
    assert PassRates.load(path, "another policy").tasks == {}
