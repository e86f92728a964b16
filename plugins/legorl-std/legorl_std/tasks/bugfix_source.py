"""Task source ``bugfix``: generated one-bug Python tasks in Harbor format (train or held-out).

The generator (:mod:`legorl_std.tasks.bugfix`) writes the set once into a cache directory keyed by
the options; :func:`legorl_std.tasks.harbor_dir.load_task` reads each task directory back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lego_rl import hookimpl
from lego_rl.kinds import Task
from lego_rl.registry import BuildContext
from legorl_std.tasks.bugfix import BUG_KINDS, DEFAULT_LEVELS, LEVELS, BugKind, ensure_tasks
from legorl_std.tasks.cache import cache_root
from legorl_std.tasks.harbor_dir import load_task


class BugfixOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: int = Field(default=64, ge=1, le=100_000, description="How many tasks.")
    seed: int = Field(default=0, description="Which tasks: the same seed, split and options give the same tasks.")
    split: Literal["train", "heldout"] = Field(
        default="train", description="heldout draws identifiers disjoint from train's (generalisation check)."
    )
    levels: list[Literal[1, 2, 3, 4]] = Field(
        default_factory=lambda: list(DEFAULT_LEVELS),
        min_length=1,
        description="Difficulty levels, cycled over the tasks: 1 names the wrong token and the sed that "
        "fixes it, 2 says what the function should return, 3 gives only a failing example, 4 names the "
        "line and two candidate fixes that only the visible tests (`python3 /app/tests/run_tests.py`) tell "
        "apart (kinds with an operator, comparison or integer to vary: wrong-operator, "
        "wrong-comparison, wrong-constant, off-by-one).",
    )
    kinds: list[BugKind] = Field(
        default_factory=lambda: list(BUG_KINDS), min_length=1, description="Bug kinds, cycled over the tasks."
    )
    fix_files: bool = Field(
        default=False,
        description="Level 4 only (refused without it): each candidate fix is a sed script in /app/fixes/ and the instruction offers "
        "`sed -i -E -f /app/fixes/1.sed /app/*.py` and `.../2.sed`, the same two commands for every task, "
        "so choosing a candidate (or switching after a failed test run) is one token.",
    )
    dir: str | None = Field(
        default=None,
        description="Cache directory (relative to the spec); default <run dir>/bugfix, "
        "or ~/.cache/legorl/bugfix without a run.",
    )

    @field_validator("levels")
    @classmethod
    def _levels_in_order(cls, value: list[int]) -> list[int]:
        """Order and repeats do not matter: [3, 1, 1] is [1, 3]."""
        return [level for level in LEVELS if level in value]

    @field_validator("kinds")
    @classmethod
    def _kinds_in_order(cls, value: list[str]) -> list[str]:
        return [kind for kind in BUG_KINDS if kind in value]

    @model_validator(mode="after")
    def _fix_files_need_level_4(self) -> BugfixOptions:
        if self.fix_files and 4 not in self.levels:
            raise ValueError(f"fix_files ships level 4's candidate fixes, and levels {self.levels} has no 4")
        return self


class BugfixTasks:
    """Generated bug-fix tasks (written to the cache on the first call to ``tasks()``)."""

    def __init__(self, options: BugfixOptions, root: Path):
        self.options = options
        self.root = root

    def tasks(self) -> list[Task]:
        o = self.options
        dirs = ensure_tasks(self.root, o.count, o.seed, o.split, list(o.levels), list(o.kinds), o.fix_files)
        return [load_task(d) for d in dirs]


def build(options: BugfixOptions, ctx: BuildContext) -> BugfixTasks:
    """Generated one-bug Python tasks of graded difficulty, train or held-out (Harbor format)."""
    return BugfixTasks(options, cache_root(options.dir, ctx, "bugfix"))


@hookimpl(specname="legorl_register_tasks")
def legorl_register_bugfix_tasks(register: Any) -> None:
    register("bugfix", build, options=BugfixOptions)
