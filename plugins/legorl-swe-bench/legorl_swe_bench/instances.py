"""SWE-bench instances from a local JSONL or parquet file, normalised to :class:`Instance`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class InstanceError(ValueError):
    """The instance file is missing or an instance is malformed; the message names which."""


class Instance(BaseModel):
    """One SWE-bench instance (the dataset's own field names; unknown fields are kept aside)."""

    model_config = ConfigDict(extra="ignore")

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    test_patch: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    version: str = ""
    patch: str = ""
    """The gold patch, written as the task's oracle ``solution/solve.sh`` when present."""
    image: str = ""
    environment_setup_commit: str = ""
    eval_script: str = ""
    """swebench >= 5 datasets ship the whole eval script; without it one is generated."""
    log_parser: str = ""
    eval_type: str = ""
    test_cmd: str = ""
    """Our extension: the test command for an instance without an eval script."""

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        """The Hugging Face datasets store the test lists as JSON strings."""
        return json.loads(value) if isinstance(value, str) else value

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        return "" if value is None else str(value)

    @field_validator("patch", "image", "environment_setup_commit", "eval_script", "log_parser",
                     "eval_type", "test_cmd", mode="before")  # fmt: skip
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("instance_id")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError(
                f"instance_id {value!r} must be a plain file name ([A-Za-z0-9._-])"
            )
        return value


def read_instances(path: Path) -> list[Instance]:
    """Every instance in a ``.jsonl``/``.json`` file (one object a line, or a list) or ``.parquet``."""
    if not path.is_file():
        raise InstanceError(
            f"SWE-bench instance file {path} does not exist (tasks.options.instances)"
        )
    rows = _rows(path)
    out: list[Instance] = []
    seen: set[str] = set()
    for where, row in rows:
        try:
            instance = Instance.model_validate(row)
        except (ValidationError, json.JSONDecodeError) as exc:
            raise InstanceError(
                f"{path}{where}: not a SWE-bench instance: {exc}"
            ) from exc
        if instance.instance_id in seen:
            raise InstanceError(
                f"{path}{where}: instance_id {instance.instance_id!r} appears twice"
            )
        seen.add(instance.instance_id)
        out.append(instance)
    if not out:
        raise InstanceError(f"{path} holds no instances")
    return out


def _rows(path: Path) -> list[tuple[str, Any]]:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise InstanceError(
                f"{path}: reading parquet needs pyarrow (pip install pyarrow)"
            ) from exc
        return [
            (f" row {i}", row) for i, row in enumerate(pq.read_table(path).to_pylist())
        ]
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = _json(path, "", text)
        rows = data if isinstance(data, list) else [data]
        return [(f" item {i}", row) for i, row in enumerate(rows)]
    return [
        (f":{n}", _json(path, f":{n}", line))
        for n, line in enumerate(text.splitlines(), 1)
        if line.strip()
    ]


def _json(path: Path, where: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InstanceError(f"{path}{where}: invalid JSON: {exc}") from exc
