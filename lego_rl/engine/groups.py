"""Small facts about trials and groups that the pool, its metrics and the filters share."""

from __future__ import annotations

from typing import Any

from lego_rl.data import Attribution, TrialResult


def first_version(result: TrialResult, launched: int) -> int:
    """The policy version of the trial's first sampled token (``launched`` if it made no call)."""
    return result.call_versions[0][0] if result.call_versions else launched


def trainable(group: list[TrialResult]) -> list[TrialResult]:
    """The trials that say something about the policy (infrastructure failures do not)."""
    return [t for t in group if t.attribution != Attribution.INFRASTRUCTURE]


def informative(group: list[TrialResult]) -> bool:
    """Whether a group carries a GRPO gradient: its trainable trials' rewards disagree."""
    rewards = {t.reward for t in trainable(group)}
    return len(rewards) > 1


class KeepAll:
    """The filter of probing and simulation: every task, every group."""

    def select_tasks(self, tasks: list[Any]) -> list[Any]:
        return list(tasks)

    def keep_group(self, group: list[TrialResult]) -> bool:
        return True
