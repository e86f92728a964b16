"""Observers that mirror the run's step metrics into TensorBoard and Weights & Biases.

Both are optional: the package is imported on the first step event, and ``preflight()`` says
how to install it when it is missing. What they log is what the run store keeps: every numeric
field of each ``step`` event (nested dicts flattened with ``/``) at that step, plus
``termination/<reason>``: how many trials ended that way since the previous step.
"""

from __future__ import annotations

import importlib.util
import math
import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from lego_rl.data import TrialResult
from lego_rl.kinds import Event, Problem
from lego_rl.registry import BuildContext


class MetricWriter(Protocol):
    """Where a metrics observer writes its scalars (opened on the first step)."""

    def scalars(self, step: int, values: dict[str, float]) -> None: ...

    def close(self) -> None: ...


def numeric_fields(data: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Every finite int/float of ``data`` (not bools), nested dicts flattened as ``a/b``."""
    out: dict[str, float] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(numeric_fields(value, f"{name}/"))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out.update({name: float(value)} if math.isfinite(value) else {})
    return out


class MetricsObserver:
    """Turns ``step`` and ``trial_end`` events into scalars for a writer opened on first use."""

    def __init__(self, name: str, package: str, open_writer: Callable[[], MetricWriter]):
        self.name, self.package, self.open_writer = name, package, open_writer
        self.writer: MetricWriter | None = None
        self._terminations: Counter[str] = Counter()
        self._lock = threading.Lock()

    def preflight(self) -> list[Problem]:
        if importlib.util.find_spec(self.package) is None:
            return [
                Problem(
                    f"the {self.name} observer needs the {self.package} package, "
                    "which is not installed",
                    f"pip install {self.package}, or remove the {self.name} observer",
                )
            ]
        return []

    def emit(self, event: Event) -> None:
        with self._lock:
            if event.kind == "trial_end" and "result" in event.data:
                self._terminations[_termination(event.data["result"])] += 1
            elif event.kind == "step":
                values = numeric_fields({k: v for k, v in event.data.items() if k != "step"})
                values.update({f"termination/{r}": float(n) for r, n in self._terminations.items()})
                self._terminations.clear()
                if self.writer is None:
                    self.writer = self.open_writer()
                self.writer.scalars(int(event.data.get("step", 0)), values)

    def close(self) -> None:
        with self._lock:
            if self.writer is not None:
                self.writer.close()
                self.writer = None


def _termination(result: TrialResult | Mapping[str, Any]) -> str:
    if isinstance(result, Mapping):
        return str(result.get("termination", "completed"))
    return result.termination.value


# ---------------------------------------------------------------- TensorBoard


class TensorBoardOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    log_dir: str = Field(
        "tensorboard", description="Event file directory; relative paths are in the run dir."
    )


class TensorBoardWriter:
    """Scalars through ``tensorboard.summary.Writer`` (no TensorFlow or torch needed)."""

    def __init__(self, log_dir: Path):
        from tensorboard.summary import Writer

        self.writer = Writer(str(log_dir))

    def scalars(self, step: int, values: dict[str, float]) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def tensorboard(options: TensorBoardOptions, ctx: BuildContext) -> MetricsObserver:
    """Write each step's metrics as TensorBoard scalars (``tensorboard --logdir RUN_DIR``)."""
    log_dir = _in_run_dir(ctx, options.log_dir)
    return MetricsObserver("tensorboard", "tensorboard", lambda: TensorBoardWriter(log_dir))


# ---------------------------------------------------------------- Weights & Biases


class WandbOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project: str = Field("lego-rl", description="W&B project.")
    entity: str | None = Field(None, description="W&B entity (team or user); None: your default.")
    mode: Literal["offline", "online", "disabled"] = Field(
        "offline",
        description="offline writes under RUN_DIR/wandb only (`wandb sync` uploads it later); "
        "online sends to W&B as the run goes.",
    )
    name: str | None = Field(None, description="Run name; None: the spec's run.name.")


_OFFLINE_ENV = {"WANDB_ERROR_REPORTING": "false", "WANDB_SILENT": "true"}
"""Set (unless the user set them) when not online: no error reports leave the machine."""


class WandbWriter:
    """One W&B run in ``run_dir/wandb``; offline by default, with system stats and code off."""

    def __init__(self, options: WandbOptions, run_dir: Path, name: str):
        if options.mode != "online":
            for key, value in _OFFLINE_ENV.items():
                os.environ.setdefault(key, value)
        import wandb

        run_dir.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=options.project,
            entity=options.entity,
            name=name,
            dir=str(run_dir),
            mode=options.mode,
            reinit="create_new",
            settings=wandb.Settings(
                silent=True,
                console="off",
                disable_code=True,
                disable_git=True,
                x_disable_stats=True,
                x_disable_meta=True,
                x_disable_machine_info=True,
            ),
        )

    def scalars(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def close(self) -> None:
        """Finish the run and wait until W&B's service has written it: ``finish()`` alone can
        return before the offline run file holds the history (seen under load: a 7-byte file).
        ``wandb.teardown`` also finishes other W&B runs of this process; a lego-rl run has one."""
        import wandb

        self.run.finish()
        wandb.teardown()


def wandb(options: WandbOptions, ctx: BuildContext) -> MetricsObserver:
    """Log each step's metrics to a Weights & Biases run (offline in the run dir by default)."""
    run_dir = _in_run_dir(ctx, ".")
    name = options.name or (ctx.spec.run.name if ctx.spec is not None else run_dir.name)
    return MetricsObserver("wandb", "wandb", lambda: WandbWriter(options, run_dir, name))


def _in_run_dir(ctx: BuildContext, path: str) -> Path:
    base = ctx.run_dir if ctx.run_dir is not None else Path.cwd()
    return (base / path).resolve()
