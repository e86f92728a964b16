"""The red-team suite: every attack through the real pipeline, on every task kind and sandbox
backend, ends with reward 0 and never as an infrastructure failure; the honest oracle of each
task still gets 1."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from legorl_std.redteam.catalog import ALL_ATTACKS, BY_NAME
from legorl_std.redteam.suite import available_backends, run_suite, summary
from legorl_std.redteam.task import LIMITS, with_timeouts

from lego_rl.data import Termination
from lego_rl.kinds import Task

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (overlay, per-trial users)"),
    # the whole suite's fixture: about 2 minutes alone on 2 cores, 6.6 beside the other tests
    pytest.mark.timeout(1800),
]
SHIPPED = Path(__file__).resolve().parents[1] / "tasks" / "quickstart" / "fix-average"
BUG = Path(__file__).resolve().parents[1] / "tasks" / "pypi-bugs" / "cachetools-7.1.5"
"""A real-repository task (src layout, PYTHONPATH=src) with upstream's fix in its history."""


def _bad(outcomes) -> list[tuple[str, str, str, float, str, str]]:
    return [(o.attack.name, o.kind, o.backend, o.reward, o.termination.value, o.reason) for o in outcomes if not o.ok]


def test_attacks_are_many_distinct_and_cover_every_class():
    assert len(ALL_ATTACKS) >= 80 and len(BY_NAME) == len(ALL_ATTACKS)
    assert {a.category for a in ALL_ATTACKS} == {
        "network", "hidden", "view", "git", "tests", "config", "verify-git", "reward", "exit", "report",
        "process", "resources", "launder",
    }  # fmt: skip
    assert all(len(a.kinds) >= 2 for a in ALL_ATTACKS), "each attack runs on more than one task kind"


def test_a_few_attacks_and_the_oracles_on_every_kind():
    chosen = [BY_NAME[n] for n in ("reward-txt", "git-leftover-copy", "conftest", "config-pytest-toml", "git-branch")]
    outcomes = run_suite(chosen, workers=2, kinds=("calc", "bugfix"), shipped=[SHIPPED], bugs=[BUG])
    assert [o.attack.name for o in outcomes[:8]] == ["oracle"] * 4 + ["no-op"] * 4
    assert [o.reward for o in outcomes[:8]] == [1.0] * 4 + [0.0] * 4
    assert [o.kind for o in outcomes[:4]] == ["calc", "bugfix", "shipped", "repo"]
    assert len(outcomes) == 8 + 4 * len(chosen)
    assert not _bad(outcomes), _bad(outcomes)
    blocked = {(o.attack.name, o.kind) for o in outcomes if o.termination == Termination.CHEAT_BLOCKED}
    assert {name for name, _ in blocked} >= {"reward-txt", "conftest"}


@pytest.fixture(scope="module")
def whole_suite():
    """Every attack on every kind of task on the local backend: one run for the tests below."""
    return run_suite(workers=3, kinds=("calc", "bugfix"), shipped=[SHIPPED], bugs=[BUG])


@pytest.mark.slow(minutes=13)
def test_the_whole_suite_gives_no_false_reward_on_every_kind(whole_suite):
    figures = summary(whole_suite)
    assert figures["false_rewards"] == 0 and figures["oracle_ok"] and figures["noop_ok"], _bad(whole_suite)
    assert not _bad(whole_suite), _bad(whole_suite)
    assert figures["attacks"] == len(ALL_ATTACKS) and figures["kinds"] == ["bugfix", "calc", "repo", "shipped"]
    assert figures["infrastructure"] == 0


@pytest.mark.slow
def test_resource_attacks_end_as_resource_limit_naming_the_limit(whole_suite):
    chosen = {a.name for a in ALL_ATTACKS if a.limits}
    assert chosen >= {"fork-bomb", "disk-fill", "memory-bomb", "launder-verify-memory"}
    on_calc = {o.attack.name: o for o in whole_suite if o.attack.name in chosen and o.kind == "calc"}
    assert set(on_calc) == chosen, "every resource attack runs on the calc task"
    assert on_calc["disk-fill"].limits == ("storage_mb", "file_size_mb")
    for o in on_calc.values():
        if o.limits:  # reported on this host: the trial ends naming one
            assert o.termination == Termination.RESOURCE_LIMIT and o.reason.split("=")[0] in o.limits, o
    assert summary(list(on_calc.values()))["resource_limits"] >= sum(bool(o.limits) for o in on_calc.values())


def test_attacks_that_end_by_themselves_after_a_limit_run_under_long_timeouts():
    """A memory bomb's race against a short timeout must not depend on load: the attacks that
    run into a limit and then end on their own get long agent and verifier timeouts, the others
    (a fork bomb, an endless loop) keep the task's short ones, which end them."""
    long = {a.name for a in ALL_ATTACKS if a.ends_by_itself}
    assert long == {"memory-bomb", "disk-fill", "launder-verify-memory"}
    assert all(BY_NAME[name].limits for name in long), "only attacks that run into a limit"
    assert not {"fork-bomb", "infinite-loop", "launder-verify-hang"} & long
    config = {**LIMITS, "metadata": {"difficulty": "easy"}, "agent": {**LIMITS["agent"], "user": "agent"}}
    task = Task(name="t", path=Path("/nonexistent"), instruction="fix it", config=config)
    longer = with_timeouts(task, 300.0)
    assert (longer.agent_timeout, longer.verifier_timeout) == (300.0, 300.0)
    assert (task.agent_timeout, task.verifier_timeout) == (10.0, 20.0), "the task itself is unchanged"
    assert longer.config["agent"]["user"] == "agent" and longer.config["metadata"] == config["metadata"]


@pytest.mark.slow
def test_laundering_ends_as_the_policys_failure(whole_suite):
    laundering = {o.attack.name: o for o in whole_suite if o.attack.category == "launder" and o.kind == "bugfix"}
    assert set(laundering) == {a.name for a in ALL_ATTACKS if a.category == "launder"}
    assert laundering["launder-verify-hang"].termination == Termination.VERIFIER_TIMEOUT
    assert laundering["launder-many-files"].termination == Termination.RESOURCE_LIMIT
    assert laundering["launder-sparse-giant"].termination == Termination.RESOURCE_LIMIT


@pytest.mark.slow
def test_the_whole_suite_on_every_other_sandbox_backend():
    others = [b for b in available_backends() if b != "local"]
    assert others == ["harbor"], "the Harbor bubblewrap environment is installed in this project"
    outcomes = run_suite(workers=3, kinds=("calc",), backends=others)
    figures = summary(outcomes)
    assert figures["false_rewards"] == 0 and figures["oracle_ok"] and not _bad(outcomes), _bad(outcomes)
    assert figures["attacks"] == len(ALL_ATTACKS) and figures["backends"] == others
