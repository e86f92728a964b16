"""The pass-through filter: every task and every group feeds the trainer."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from lego_rl import hookimpl
from lego_rl.data import TrialResult
from lego_rl.kinds import Task
from lego_rl.registry import BuildContext


class NoFilterOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoFilter:
    """Keep every task and every group (difficulty filters come with the orchestration issue)."""

    def select_tasks(self, tasks: list[Task]) -> list[Task]:
        return list(tasks)

    def keep_group(self, group: list[TrialResult]) -> bool:
        return True


def no_filter(options: NoFilterOptions, ctx: BuildContext) -> NoFilter:
    """Keep every task and every group."""
    return NoFilter()


@hookimpl
def legorl_register_filter(register) -> None:
    register("none", no_filter, options=NoFilterOptions)
