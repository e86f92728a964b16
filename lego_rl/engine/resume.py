"""Where a run goes: continue the run directory's last checkpoint, or a fresh directory.

The trainer writes ``run_dir/checkpoints/last/`` (weights, optimizer, the pool's
``engine_state``); ``legorl apply`` with the same spec and ``run.resume`` on continues from
it. A run directory that holds another run (a different spec, or no checkpoint) is never
overwritten: the run goes to the first free ``name-N``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lego_rl.spec.models import Spec

LAST_CHECKPOINT = Path("checkpoints") / "last"
"""Relative to the run directory."""

SPEC_FILE = "spec.yaml"

MAY_CHANGE = {("run", "steps"), ("run", "resume"), ("run", "output_dir")}
"""Spec fields a resumed run may change (e.g. more steps)."""


@dataclass(frozen=True)
class RunDir:
    path: Path
    resume_from: Path | None
    """The checkpoint to continue from, None for a fresh run."""
    note: str = ""


def checkpoint_of(run_dir: Path) -> Path | None:
    """The run's last checkpoint if one was written completely (a non-empty directory)."""
    path = run_dir / LAST_CHECKPOINT
    return path if path.is_dir() and any(path.iterdir()) else None


def spec_matches(run_dir: Path, spec: Spec) -> bool:
    """Whether the run directory's spec is ``spec`` (up to :data:`MAY_CHANGE`)."""
    saved = run_dir / SPEC_FILE
    if not saved.is_file():
        return False
    try:
        before = yaml.safe_load(saved.read_text())
    except yaml.YAMLError:
        return False
    return _comparable(before) == _comparable(spec.model_dump(mode="json"))


def choose_run_dir(spec: Spec) -> RunDir:
    """Resume ``spec.run.run_dir`` when it holds a matching checkpoint, else a fresh directory."""
    wanted = spec.run.run_dir.resolve()
    checkpoint = checkpoint_of(wanted)
    if spec.run.resume and checkpoint is not None:
        if spec_matches(wanted, spec):
            return RunDir(wanted, checkpoint, f"resuming {wanted} from {checkpoint}")
        why = f"{wanted} holds a run of a different spec"
    elif checkpoint is not None:
        why = f"{wanted} holds an earlier run (run.resume is off)"
    else:
        why = f"{wanted} holds an earlier run without a checkpoint"
    fresh = fresh_run_dir(wanted)
    return RunDir(fresh, None, "" if fresh == wanted else f"{why}; this one goes to {fresh}")


def fresh_run_dir(wanted: Path) -> Path:
    """``wanted`` if unused, else the first free ``wanted-N``: a run never overwrites another."""
    candidate, n = wanted, 1
    while candidate.exists() and any(candidate.iterdir()):
        n += 1
        candidate = wanted.with_name(f"{wanted.name}-{n}")
    return candidate


def _comparable(dump: Any) -> Any:
    if not isinstance(dump, dict):
        return dump
    out = dict(dump)
    run = dict(out.get("run") or {})
    for section, key in MAY_CHANGE:
        if section == "run":
            run.pop(key, None)
    out["run"] = run
    return out
