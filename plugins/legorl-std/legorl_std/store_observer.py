"""Observer plugins that persist run events: the SQLite run store and a JSONL log."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from lego_rl import hookimpl
from lego_rl.kinds import Event
from lego_rl.observe.store import RunStore, to_json
from lego_rl.registry import BuildContext
from legorl_std.dashboard_observer import DashboardOptions, dashboard
from legorl_std.metric_sinks import TensorBoardOptions, WandbOptions, tensorboard, wandb


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


class JsonlObserver:
    """Append every run event as one JSON line."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._file = None

    def emit(self, event: Event) -> None:
        line = json.dumps(
            {"time": event.time, "kind": event.kind, "data": json.loads(to_json(event.data))}
        )
        with self._lock:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("a")
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def jsonl(options: JsonlOptions, ctx: BuildContext) -> JsonlObserver:
    """Append every run event as one JSON line to a file in the run directory."""
    base = ctx.run_dir if ctx.run_dir is not None else Path.cwd()
    return JsonlObserver(base / options.file)


@hookimpl
def legorl_register_observer(register) -> None:
    register("store", store, options=StoreOptions)
    register("jsonl", jsonl, options=JsonlOptions)
    register("dashboard", dashboard, options=DashboardOptions)
    register("tensorboard", tensorboard, options=TensorBoardOptions)
    register("wandb", wandb, options=WandbOptions)
