"""The {{name}} filter: skips tasks by name and keeps only groups that teach something."""

from __future__ import annotations

import fnmatch

from pydantic import BaseModel, ConfigDict, Field

from lego_rl import hookimpl
from lego_rl.data import TrialResult
from lego_rl.kinds import Task
from lego_rl.registry import BuildContext


class {{Class}}Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    exclude: list[str] = Field(default_factory=list)
    """Task name patterns (fnmatch) never to train on."""


class {{Class}}:
    """Drops excluded tasks, and groups whose rewards all agree (no advantage to learn from)."""

    def __init__(self, options: {{Class}}Options, ctx: BuildContext) -> None:
        self.options = options

    def select_tasks(self, tasks: list[Task]) -> list[Task]:
        return [t for t in tasks if not any(fnmatch.fnmatch(t.name, p) for p in self.options.exclude)]

    def keep_group(self, group: list[TrialResult]) -> bool:
        return len({r.reward for r in group}) > 1

    # Optional capability (lego_rl.kinds): ResamplesGroups, the pool samples up to this share
    # of tasks_per_step extra groups per step to replace the ones keep_group rejects.
    # resample_budget: float = 0.5


@hookimpl
def legorl_register_filter(register) -> None:
    register("{{name}}", {{Class}}, options={{Class}}Options)
