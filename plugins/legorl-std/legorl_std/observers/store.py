"""Observer plugins that persist run events: the SQLite run store and a light JSONL log."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import threading
from pathlib import Path
from typing import TextIO

from pydantic import BaseModel, ConfigDict, Field

from lego_rl import hookimpl
from lego_rl.kinds import Event
from lego_rl.observe.store import RunStore, light_data
from lego_rl.registry import BuildContext
from legorl_std.observers.dashboard import DashboardOptions, dashboard
from legorl_std.observers.metric_sinks import TensorBoardOptions, WandbOptions, tensorboard, wandb


class StoreOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


def store(options: StoreOptions, ctx: BuildContext) -> RunStore:
    """Append every run event to store.sqlite in the run directory."""
    if ctx.run_dir is None:
        raise ValueError("the store observer needs a run directory")
    return RunStore(ctx.run_dir)


class JsonlOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str = "events.jsonl"
    details: bool = Field(
        False,
        description="Also write each trial's harness and verifier details (transcripts, test "
        "output); the run store keeps them either way.",
    )
    rotate_mb: float | None = Field(
        64.0,
        gt=0,
        description="Past this size the file is compressed to <name>-<n>.jsonl.gz and a new "
        "one begun; null: one file, never rotated.",
    )


class JsonlObserver:
    """Append every run event as one JSON line, light: a call's record without its token
    arrays (their sizes instead), a trial's result without its trajectories (and, unless
    ``details``, without the harness's and verifier's details); the run store keeps those
    (``store`` observer)."""

    def __init__(self, path: Path, rotate_bytes: int | None = None, *, details: bool = False):
        self.path = path
        self.rotate_bytes = rotate_bytes
        self.details = details
        self._lock = threading.Lock()
        self._file: TextIO | None = None

    def emit(self, event: Event) -> None:
        line = json.dumps(
            {
                "time": event.time,
                "kind": event.kind,
                "data": light_data(event.kind, event.data, details=self.details),
            }
        )
        with self._lock:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("a")
            self._file.write(line + "\n")
            self._file.flush()
            if self.rotate_bytes is not None and self._file.tell() >= self.rotate_bytes:
                self._file.close()
                self._file = None
                rotate(self.path)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def rotate(path: Path) -> Path:
    """Compress a full log to the first free ``<stem>-<n><suffix>.gz`` beside it (n from 1)."""
    n = 1
    while (target := path.with_name(f"{path.stem}-{n}{path.suffix}.gz")).exists():
        n += 1
    part = target.with_name(target.name + ".part")
    with path.open("rb") as src, gzip.open(part, "wb") as out:
        shutil.copyfileobj(src, out)
    os.replace(part, target)
    path.unlink()
    return target


def jsonl(options: JsonlOptions, ctx: BuildContext) -> JsonlObserver:
    """Append every run event as one light JSON line to a file in the run directory."""
    base = ctx.run_dir if ctx.run_dir is not None else Path.cwd()
    limit = None if options.rotate_mb is None else int(options.rotate_mb * 1e6)
    return JsonlObserver(base / options.file, limit, details=options.details)


@hookimpl
def legorl_register_observer(register) -> None:
    register("store", store, options=StoreOptions)
    register("jsonl", jsonl, options=JsonlOptions)
    register("dashboard", dashboard, options=DashboardOptions)
    register("tensorboard", tensorboard, options=TensorBoardOptions)
    register("wandb", wandb, options=WandbOptions)
