"""Filter plugins: which tasks and which groups feed the trainer.

- ``none``: everything.
- ``group-variance`` (online): a group whose rewards all agree carries no GRPO gradient; it
  is dropped and the rollout pool generates a replacement, up to ``max_extra`` extra groups
  per batch (as a fraction of ``run.tasks_per_step``).
- ``pass-rate`` (offline): keeps the tasks whose probed pass rate lies in a band (the seed's
  1-3 successes of 8); ``legorl probe SPEC`` measures and stores the rates. It can drop
  uniform groups as well (``resample_uniform``), so both filters combine in one block.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lego_rl import hookimpl
from lego_rl.data import TrialResult
from lego_rl.engine.groups import informative
from lego_rl.engine.passrates import PassRates, default_path, policy_key
from lego_rl.kinds import Problem, Task
from lego_rl.registry import BuildContext


class NoFilterOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoFilter:
    """Keep every task and every group."""

    def select_tasks(self, tasks: list[Task]) -> list[Task]:
        return list(tasks)

    def keep_group(self, group: list[TrialResult]) -> bool:
        return True


def no_filter(options: NoFilterOptions, ctx: BuildContext) -> NoFilter:
    """Keep every task and every group."""
    return NoFilter()


class GroupVarianceOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_extra: float = Field(
        default=1.0,
        ge=0.0,
        description="Replacement groups per batch, as a fraction of run.tasks_per_step "
        "(1.0: at most twice the generation); past it, uniform groups are trained (loss 0).",
    )


class GroupVarianceFilter:
    """Drop groups whose trainable trials all got the same reward; the pool replaces them."""

    def __init__(self, max_extra: float):
        self.resample_budget = max_extra
        """Read by the rollout pool: extra groups per batch it may generate as replacements."""

    def select_tasks(self, tasks: list[Task]) -> list[Task]:
        return list(tasks)

    def keep_group(self, group: list[TrialResult]) -> bool:
        return informative(group)


def group_variance(options: GroupVarianceOptions, ctx: BuildContext) -> GroupVarianceFilter:
    """Drop all-pass and all-fail groups and generate replacements (bounded)."""
    return GroupVarianceFilter(options.max_extra)


class PassRateOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str | None = Field(
        default=None,
        description="Probe results (JSON); default: run.output_dir/pass_rates.json, as `legorl probe` writes.",
    )
    probes: int = Field(default=8, ge=1, description="Attempts per task that `legorl probe` runs.")
    min_passes: int = Field(default=1, ge=0, description="Lowest successes of `probes` kept.")
    max_passes: int = Field(default=3, ge=0, description="Highest successes of `probes` kept.")
    unprobed: Literal["keep", "drop"] = Field(
        default="keep", description="What to do with a task the probe has no result for."
    )
    resample_uniform: bool = Field(
        default=False, description="Also drop uniform groups online, as group-variance does."
    )
    max_extra: float = Field(default=1.0, ge=0.0, description="With resample_uniform: as group-variance.")

    @model_validator(mode="after")
    def _band(self) -> PassRateOptions:
        if not self.min_passes <= self.max_passes <= self.probes:
            raise ValueError(
                f"need min_passes <= max_passes <= probes, got {self.min_passes}, "
                f"{self.max_passes}, {self.probes}"
            )
        return self


class PassRateFilter:
    """Keep tasks whose probed pass rate is within [min, max] passes of ``probes``."""

    def __init__(self, options: PassRateOptions, path: Path | None, policy: str):
        self.options, self.path, self.policy = options, path, policy
        self.resample_budget = options.max_extra if options.resample_uniform else 0.0

    def preflight(self) -> list[Problem]:
        if self.path is None or not self.path.is_file():
            return [
                Problem(
                    f"filter pass-rate: no probe results at {self.path}",
                    fix="run `legorl probe SPEC` first (or set filter.options.file)",
                )
            ]
        if not self.rates().tasks:
            return [
                Problem(
                    f"filter pass-rate: {self.path} holds no rates of policy {self.policy!r}",
                    fix="run `legorl probe SPEC` to probe the current policy",
                )
            ]
        return []

    def rates(self) -> PassRates:
        return PassRates.load(self.path, self.policy) if self.path else PassRates(self.policy)

    def select_tasks(self, tasks: list[Task]) -> list[Task]:
        rates, o = self.rates(), self.options
        low, high = o.min_passes / o.probes, o.max_passes / o.probes
        kept = []
        for task in tasks:
            rate = rates.rate(task.name)
            if rate is None:
                if o.unprobed == "keep":
                    kept.append(task)
            elif low - 1e-9 <= rate <= high + 1e-9:
                kept.append(task)
        return kept

    def keep_group(self, group: list[TrialResult]) -> bool:
        return informative(group) if self.options.resample_uniform else True


def pass_rate(options: PassRateOptions, ctx: BuildContext) -> PassRateFilter:
    """Keep tasks of a probed difficulty band (1-3 successes of 8 by default)."""
    if options.file is not None:
        path: Path | None = ctx.path(options.file)
    else:
        path = default_path(ctx.spec).resolve() if ctx.spec is not None else None
    policy = policy_key(ctx.spec.model) if ctx.spec is not None else ""
    return PassRateFilter(options, path, policy)


@hookimpl
def legorl_register_filter(register) -> None:
    register("none", no_filter, options=NoFilterOptions)
    register("group-variance", group_variance, options=GroupVarianceOptions)
    register("pass-rate", pass_rate, options=PassRateOptions)
