"""Checks the end-to-end training tests share: a step trained exactly the tokens the proxy
recorded, read back from a finished run's store.

Imported by tests/test_learning_signal.py and tests/test_harness_model_driven.py (pytest puts
tests/ on sys.path for them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lego_rl.data import Trajectory
from lego_rl.observe.store import read_calls, read_trajectory, read_trials


def sampled_tokens(run_dir: Path, trial: dict[str, Any], rolled_back: list[int]) -> list[tuple[int, float]]:
    """Every (id, log-prob) the inference backend sampled for the trial, in call order."""
    return [
        pair
        for rec in read_calls(run_dir, trial["trial_id"])
        if rec.index not in rolled_back and not rec.error
        for pair in zip(rec.completion_ids, rec.logprobs, strict=True)
    ]


def trained_tokens(trajectory: Trajectory) -> list[tuple[int, float]]:
    """Every (id, log-prob) of the trajectory the loss covers, in order."""
    return [
        (tok, lp)
        for seg in trajectory.segments
        for tok, m, lp in zip(seg.ids, seg.loss_mask, seg.logprobs, strict=True)
        if m
    ]


def training_trials(run_dir: Path, step: int) -> list[dict[str, Any]]:
    """The trials of ``step`` sampled for training (held-out evaluation ones left out)."""
    return [t for t in read_trials(run_dir) if t["step"] == step and not t["group"].startswith("eval-")]


def check_trained_on_recorded_tokens(run_dir: Path, step: int) -> int:
    """Asserts that each training trial of ``step`` has a trajectory whose trained tokens are,
    id for id and log-prob for log-prob, the ones the proxy recorded the backend sampling (its
    rolled-back calls left out); returns how many tokens that is over the step."""
    checked = 0
    for trial in training_trials(run_dir, step):
        traj = read_trajectory(run_dir, trial["trial_id"])
        assert traj is not None, trial["trial_id"]
        trained = trained_tokens(traj)
        assert trained == sampled_tokens(run_dir, trial, traj.rolled_back), trial["trial_id"]
        checked += len(trained)
    return checked
