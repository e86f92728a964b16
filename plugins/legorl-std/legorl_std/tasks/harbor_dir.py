"""Task source ``harbor-dir``: Harbor-format task directories on disk.

A task directory holds ``task.toml``, ``instruction.md``, ``environment/``, ``tests/`` and
optionally ``solution/``. ``path`` is either one such directory or a directory of them.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lego_rl import hookimpl
from lego_rl.kinds import Task
from lego_rl.registry import BuildContext

REQUIRED_FILES = ("task.toml", "instruction.md")


class TaskSourceError(ValueError):
    """A task directory is missing or malformed; the message names the file."""


class HarborDirOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="A Harbor task directory, or a directory of them (relative to the spec).")
    include: list[str] = Field(
        default_factory=list, description="Glob patterns of task names to keep (default: all)."
    )
    exclude: list[str] = Field(default_factory=list, description="Glob patterns of task names to drop.")


class HarborDirTasks:
    """Harbor task directories under a path (read on each call to ``tasks()``)."""

    def __init__(self, root: Path, include: list[str] | None = None, exclude: list[str] | None = None):
        self.root = root
        self.include = include or []
        self.exclude = exclude or []

    def tasks(self) -> list[Task]:
        dirs = self._task_dirs()
        kept = [d for d in dirs if self._selected(d.name)]
        if not kept:
            names = ", ".join(d.name for d in dirs)
            raise TaskSourceError(
                f"no task under {self.root} matches include={self.include} exclude={self.exclude} "
                f"(task names: {names})"
            )
        return [load_task(d) for d in kept]

    def _task_dirs(self) -> list[Path]:
        if not self.root.is_dir():
            raise TaskSourceError(
                f"task path {self.root} does not exist or is not a directory "
                "(set tasks.options.path to a Harbor task dir or a dir of them; "
                "relative paths are resolved against the spec file)"
            )
        if (self.root / "task.toml").exists():
            return [self.root]
        dirs = sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
        if not dirs:
            raise TaskSourceError(
                f"no task directories under {self.root} (each needs {' and '.join(REQUIRED_FILES)})"
            )
        return dirs

    def _selected(self, name: str) -> bool:
        if self.include and not any(fnmatch.fnmatchcase(name, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(name, p) for p in self.exclude)


def load_task(task_dir: Path) -> Task:
    """One Harbor task directory -> Task (config = parsed task.toml)."""
    for required in REQUIRED_FILES:
        if not (task_dir / required).is_file():
            raise TaskSourceError(
                f"{task_dir} is not a Harbor task: {required} is missing "
                "(a task dir needs task.toml, instruction.md, environment/, tests/; "
                "remove the dir or drop it with tasks.options.exclude)"
            )
    toml_path = task_dir / "task.toml"
    try:
        config = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskSourceError(f"{toml_path}: invalid TOML: {exc}") from exc
    _check_timeouts(toml_path, config)
    instruction = (task_dir / "instruction.md").read_text(encoding="utf-8").strip()
    if not instruction:
        raise TaskSourceError(f"{task_dir / 'instruction.md'} is empty: write the task for the agent")
    return Task(name=task_dir.name, path=task_dir.resolve(), instruction=instruction, config=config)


def _check_timeouts(toml_path: Path, config: dict[str, Any]) -> None:
    for section in ("agent", "verifier"):
        table = config.get(section, {})
        if not isinstance(table, dict):
            raise TaskSourceError(f"{toml_path}: [{section}] must be a table")
        value = table.get("timeout_sec")
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        ):
            raise TaskSourceError(
                f"{toml_path}: [{section}] timeout_sec must be a positive number of seconds, got {value!r}"
            )


def build(options: HarborDirOptions, ctx: BuildContext) -> HarborDirTasks:
    """Harbor-format task directories (task.toml, instruction.md, environment/, tests/)."""
    return HarborDirTasks(ctx.path(options.path), options.include, options.exclude)


@hookimpl
def legorl_register_tasks(register: Any) -> None:
    register("harbor-dir", build, options=HarborDirOptions)
