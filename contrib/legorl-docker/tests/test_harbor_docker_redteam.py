"""The whole red team (legorl-std's suite) on Harbor's own docker environment (the harbor
sandbox with ``type: docker`` on lego-rl's daemon): every attack on a real repository with
upstream's fix in its history, with pristine verification in a fresh container, the agent as
its own user, no network: reward 0 everywhere, no ending laundered as ours, the oracle 1 and
doing nothing 0. Harbor's sandboxes do not say which limit stopped a command, so the resource
attacks need only fail there."""

from __future__ import annotations

from pathlib import Path

import pytest
from legorl_std.redteam.catalog import ALL_ATTACKS
from legorl_std.redteam.suite import available_backends, run_suite, summary

# a hang limit: 533-1048 s beside the other tests on 2 cores, 1846 s started first beside the two other red teams
pytestmark = [pytest.mark.slow(minutes=16), pytest.mark.timeout(3600)]

BUG = Path(__file__).resolve().parents[3] / "tasks" / "pypi-bugs" / "cachetools-7.1.5"


def test_the_whole_red_team_gives_no_false_reward_in_harbors_containers(docker_host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", docker_host)  # Harbor's docker CLI calls reach our daemon
    monkeypatch.setenv("DOCKER_BUILDKIT", "0")  # the classic builder: `network: none` holds for every RUN
    assert "harbor-docker" in available_backends(), "the red team configures Harbor's docker environment when its daemon answers"
    outcomes = run_suite(workers=3, kinds=(), bugs=[BUG], backends=["harbor-docker"])
    figures = summary(outcomes)
    bad = [(o.attack.name, o.kind, o.reward, o.termination.value, o.reason[:200]) for o in outcomes if not o.ok]
    assert not bad, bad
    assert figures["false_rewards"] == 0 and figures["infrastructure"] == 0 and figures["oracle_ok"] and figures["noop_ok"]
    assert figures["attacks"] == len(ALL_ATTACKS) and figures["backends"] == ["harbor-docker"]
