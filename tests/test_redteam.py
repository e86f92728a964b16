"""The red-team suite: every attack through the real pipeline ends with reward 0, the
honest oracle of the same task still gets 1."""

from __future__ import annotations

import os
import shutil

import pytest
from legorl_std.redteam.attacks import ATTACKS
from legorl_std.redteam.suite import run_suite, summary

from lego_rl.data import Termination

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (overlay, per-trial users)"),
]


def test_attacks_are_many_and_distinct():
    assert len(ATTACKS) >= 25 and len({a.name for a in ATTACKS}) == len(ATTACKS)
    assert {a.category for a in ATTACKS} == {"network", "hidden", "git", "tests", "reward", "process", "resources"}


def test_a_few_attacks_and_the_oracle():
    chosen = [a for a in ATTACKS if a.name in ("reward-txt", "git-leftover-copy", "conftest")]
    outcomes = run_suite(chosen, workers=2)
    assert [o.attack.name for o in outcomes] == ["oracle", *(a.name for a in chosen)]
    assert all(o.ok for o in outcomes), [(o.attack.name, o.reward, o.termination, o.reason) for o in outcomes]
    assert outcomes[0].reward == 1.0
    assert {o.attack.name for o in outcomes if o.termination == Termination.CHEAT_BLOCKED} == {"reward-txt", "conftest"}


def test_resource_attacks_end_as_resource_limit_naming_the_limit():
    chosen = [a for a in ATTACKS if a.limits]
    assert {a.name for a in chosen} == {"fork-bomb", "disk-fill", "memory-bomb"}
    outcomes = run_suite(chosen, workers=3)
    assert all(o.ok for o in outcomes), [(o.attack.name, o.reward, o.termination, o.reason) for o in outcomes]
    assert {o.attack.name: o.limits for o in outcomes[1:]}["disk-fill"] == ("storage_mb", "file_size_mb")
    for o in outcomes[1:]:
        if o.limits:  # reported on this host: the trial ends naming one
            assert o.termination == Termination.RESOURCE_LIMIT and o.reason.split("=")[0] in o.limits
    assert summary(outcomes)["resource_limits"] == sum(bool(o.limits) for o in outcomes)


@pytest.mark.slow
def test_the_whole_suite_gives_no_false_reward():
    outcomes = run_suite(workers=3)
    figures = summary(outcomes)
    bad = [(o.attack.name, o.reward, o.termination.value, o.reason) for o in outcomes if not o.ok]
    assert figures["false_rewards"] == 0 and figures["oracle_ok"] and not bad, bad
    assert figures["attacks"] == len(ATTACKS)
