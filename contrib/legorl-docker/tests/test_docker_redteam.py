"""The whole red team (legorl-std's suite) on the docker sandbox: every attack on a real
repository with upstream's fix in its history (the calc task gets the sandbox contracts' attack
subset, test_docker_conformance.py; both kinds take ~15 min here, so CI runs the real one),
through the real pipeline in containers with no network: reward 0 everywhere, no ending
laundered as ours, the oracle 1 and doing nothing 0."""

from __future__ import annotations

from pathlib import Path

import pytest
from legorl_std.redteam.catalog import ALL_ATTACKS
from legorl_std.redteam.suite import available_backends, run_suite, summary

# a hang limit: ~8 min alone on 2 cores, 550-866 s beside the other tests, 1323 s started first beside the two other red teams
pytestmark = [pytest.mark.slow(minutes=18), pytest.mark.timeout(3600)]

BUG = Path(__file__).resolve().parents[3] / "tasks" / "pypi-bugs" / "cachetools-7.1.5"


def test_the_whole_red_team_gives_no_false_reward_in_containers(docker_host: str) -> None:
    assert "docker" in available_backends(), "the red team configures the docker sandbox when its daemon answers"
    outcomes = run_suite(workers=3, kinds=(), bugs=[BUG], backends=["docker"])
    figures = summary(outcomes)
    bad = [(o.attack.name, o.kind, o.reward, o.termination.value, o.reason[:200]) for o in outcomes if not o.ok]
    assert not bad, bad
    assert figures["false_rewards"] == 0 and figures["infrastructure"] == 0 and figures["oracle_ok"] and figures["noop_ok"]
    assert figures["attacks"] == len(ALL_ATTACKS) and figures["kinds"] == ["repo"] and figures["backends"] == ["docker"]
