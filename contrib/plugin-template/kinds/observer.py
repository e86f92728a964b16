"""The {{name}} observer: every run event as one JSON line in a file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

from pydantic import BaseModel, ConfigDict

from lego_rl import hookimpl
from lego_rl.kinds import Event
from lego_rl.registry import BuildContext


class {{Class}}Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str = "{{name}}-events.jsonl"
    """Where to write, relative to the run directory."""


class {{Class}}:
    """Appends each event (kind, time, data) as a JSON line."""

    def __init__(self, options: {{Class}}Options, ctx: BuildContext) -> None:
        self.path = Path(ctx.run_dir or ".") / options.file
        self._out: IO[str] | None = None

    def emit(self, event: Event) -> None:
        if self._out is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._out = self.path.open("a")
        line = {"kind": event.kind, "time": event.time, "data": event.data}
        self._out.write(json.dumps(line, default=str) + "\n")
        self._out.flush()

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    # Optional capability (lego_rl.kinds): Preflights, prerequisites `legorl plan` shows.
    # def preflight(self) -> list[Problem]: ...
    # Serves: an observer that serves what it saw instead of writing files under the run
    # directory names its address (contract observer.leaves-a-trace reads it on loopback).
    # @property
    # def url(self) -> str | None: ...


@hookimpl
def legorl_register_observer(register) -> None:
    register("{{name}}", {{Class}}, options={{Class}}Options)
