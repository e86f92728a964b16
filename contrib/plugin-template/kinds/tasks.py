"""The {{name}} task source: Harbor-format task directories under one path."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from lego_rl import hookimpl
from lego_rl.kinds import Task
from lego_rl.registry import BuildContext


class {{Class}}Options(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"path": "tasks"}]})

    path: str
    """The directory whose subdirectories are tasks (relative to the spec file)."""


class {{Class}}:
    """Tasks from {{name}}: every subdirectory with instruction.md, task.toml and tests/."""

    def __init__(self, options: {{Class}}Options, ctx: BuildContext) -> None:
        self.root = ctx.path(options.path)

    def tasks(self) -> list[Task]:
        found = []
        for path in sorted(p for p in Path(self.root).iterdir() if (p / "instruction.md").is_file()):
            config = tomllib.loads((path / "task.toml").read_text()) if (path / "task.toml").is_file() else {}
            found.append(Task(name=path.name, path=path, instruction=(path / "instruction.md").read_text(), config=config))
        return found

    # Optional capability (lego_rl.kinds): Preflights, prerequisites `legorl plan` shows.
    # def preflight(self) -> list[Problem]: ...


@hookimpl
def legorl_register_tasks(register) -> None:
    register("{{name}}", {{Class}}, options={{Class}}Options)
