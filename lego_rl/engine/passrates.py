"""Per-task pass rates from probing (``legorl probe``), stored as JSON and reused.

The file records which policy was probed; ``legorl probe`` adds attempts only to tasks
that have fewer than asked for, so a second probe of the same policy costs nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from lego_rl.spec.models import ModelSpec, Spec

FILE_NAME = "pass_rates.json"


def default_path(spec: Spec) -> Path:
    """Where probing writes and the pass-rate filter reads: ``run.output_dir/pass_rates.json``."""
    return spec.run.output_dir / FILE_NAME


def policy_key(model: ModelSpec) -> str:
    """Which policy was probed: its name and weights (a checkpoint path, or built from config)."""
    return f"{model.name}@{model.path or 'config'}"


@dataclass
class PassRates:
    policy: str
    tasks: dict[str, list[int]] = field(default_factory=dict)
    """Task -> [attempts, successes]."""

    def rate(self, task: str) -> float | None:
        attempts, successes = self.tasks.get(task, (0, 0))
        return successes / attempts if attempts else None

    def add(self, task: str, success: bool) -> None:
        seen = self.tasks.setdefault(task, [0, 0])
        seen[0] += 1
        seen[1] += int(success)

    def missing(self, task: str, attempts: int) -> int:
        return max(0, attempts - self.tasks.get(task, [0, 0])[0])

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"policy": self.policy, "tasks": self.tasks}, indent=1, sort_keys=True))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path, policy: str) -> PassRates:
        """The stored rates of ``policy`` (empty when the file is absent or probed another policy)."""
        if not path.is_file():
            return cls(policy)
        raw = json.loads(path.read_text())
        if raw.get("policy") != policy:
            return cls(policy)
        return cls(policy, {k: [int(a), int(s)] for k, (a, s) in raw.get("tasks", {}).items()})
