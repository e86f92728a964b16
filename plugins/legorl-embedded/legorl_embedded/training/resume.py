"""The embedded trainer's resumable state: written atomically, read back on a re-run.

``run_dir/checkpoints/last`` is a symlink to the newest ``state-NNNNNN`` directory, swapped
with ``os.replace`` only after the new state is complete, so a kill at any moment leaves
either the previous state or the new one. A state holds ``trainer.pt`` (model, optimizer,
learning-rate schedule, next step, torch and inference RNG) and ``engine.json`` (the
rollout's position from :meth:`RunContext.engine_state`).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass
class TrainerState:
    step: int
    """The next step to run (steps before it are done)."""
    model: dict[str, Any]
    optimizer: dict[str, Any]
    schedule: dict[str, Any]
    torch_rng: torch.Tensor
    inference_rng: Any
    engine: dict[str, Any]


def last_state_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / "last"


def save_state(run_dir: Path, state: TrainerState) -> Path:
    """Write ``state`` and point ``checkpoints/last`` at it; older states are removed."""
    root = run_dir / "checkpoints"
    target = root / f"state-{state.step:06d}"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    payload = {k: v for k, v in state.__dict__.items() if k != "engine"}
    torch.save(payload, target / "trainer.pt")
    (target / "engine.json").write_text(json.dumps(state.engine))
    link = root / "last.tmp"
    link.unlink(missing_ok=True)
    link.symlink_to(target.name)
    os.replace(link, root / "last")
    for old in root.glob("state-*"):
        if old != target:
            shutil.rmtree(old, ignore_errors=True)
    return target


def load_state(where: Path) -> TrainerState | None:
    """The state in ``where`` (e.g. :func:`last_state_dir`), or None when there is none."""
    if not (where / "trainer.pt").is_file():
        return None
    payload = torch.load(where / "trainer.pt", weights_only=True)
    engine = json.loads((where / "engine.json").read_text())
    return TrainerState(engine=engine, **payload)
