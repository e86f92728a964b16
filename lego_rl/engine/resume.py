"""Where a run goes: continue the run directory's last checkpoint, or a fresh directory.

The trainer writes ``run_dir/checkpoints/last/`` (weights, optimizer, the pool's
``engine_state``); ``legorl apply`` with the same spec and ``run.resume`` on continues from
it. A run directory that holds another run (a different spec, or no checkpoint) is never
overwritten: the run goes to the first free ``name-N``.

Trials a killed run finished after its last checkpoint are in the run store but not in the
checkpoint. :func:`restore_pool` hands them back to the resumed pool (:class:`Recovered`)
when they were sampled with weights the checkpoint holds, instead of running them again;
and it gives the resumed run's trials names no earlier attempt used. A run directory whose
store is of the first schema is converted (:mod:`lego_rl.observe.migrate`) when it resumes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lego_rl.data import Attribution, Termination, TrialResult
from lego_rl.engine.pool import Job, Launcher, RolloutPool
from lego_rl.observe.migrate import migrate, store_version
from lego_rl.observe.store import (
    SCHEMA_VERSION,
    STORE_FILE,
    count_events,
    read_results,
    read_trials,
)
from lego_rl.spec.models import Spec, current_names

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
            note = f"resuming {wanted} from {checkpoint}{_convert(wanted)}"
            return RunDir(wanted, checkpoint, note)
        why = f"{wanted} holds a run of a different spec"
    elif checkpoint is not None:
        why = f"{wanted} holds an earlier run (run.resume is off)"
    else:
        why = f"{wanted} holds an earlier run without a checkpoint"
    fresh = fresh_run_dir(wanted)
    return RunDir(fresh, None, "" if fresh == wanted else f"{why}; this one goes to {fresh}")


def _convert(run_dir: Path) -> str:
    """Bring a resumed directory's store to this lego-rl's schema; what was done, for the note."""
    if store_version(run_dir) in (0, SCHEMA_VERSION):
        return ""
    return f" (its store converted: {migrate(run_dir).line()})"


def restarts(run_dir: Path) -> int:
    """How often the run in ``run_dir`` was started before the current attempt (0 for a fresh
    run, and without a store): its ``run_start`` events but the current one's."""
    return max(0, count_events(run_dir, "run_start") - 1)


def fresh_run_dir(wanted: Path) -> Path:
    """``wanted`` if unused, else the first free ``wanted-N``: a run never overwrites another."""
    candidate, n = wanted, 1
    while candidate.exists() and any(candidate.iterdir()):
        n += 1
        candidate = wanted.with_name(f"{wanted.name}-{n}")
    return candidate


def _comparable(dump: Any) -> Any:
    """``dump`` without what may change, its blocks under their current names."""
    if not isinstance(dump, dict):
        return dump
    try:
        out = dict(current_names(dump))
    except ValueError:
        return dump
    run = dict(out.get("run") or {})
    for section, key in MAY_CHANGE:
        if section == "run":
            run.pop(key, None)
    out["run"] = run
    return out


# ------------------------------------------------------------ trials finished after the checkpoint

Slot = tuple[int, str, int]
"""(group sequence number, task, member index): one group member, whichever attempt ran it."""

POLICY_VERSION = "policy_version"
"""Key of :func:`engine_state`: the policy version the checkpoint's weights are."""


def engine_state(pool: RolloutPool) -> dict[str, Any]:
    """The pool's state plus the policy version it was saved at (what :func:`restore_pool`
    may reuse: trials sampled with no later version)."""
    return {**pool.state(), POLICY_VERSION: pool.version()}


def restore_pool(pool: RolloutPool, state: dict[str, Any], run_dir: Path) -> int:
    """``pool.restore(state)`` for a resumed run; returns how many finished trials of the
    killed run it may reuse (:func:`recoverable`).

    The pool names trials of a resumed run with its epoch (resumes so far); the epoch is
    raised to the number of earlier attempts in the store, so a run killed twice before a
    new checkpoint never reuses the names (and store rows) of the attempt in between.
    """
    attempts = restarts(run_dir)
    pool.restore({**state, "epoch": max(int(state.get("epoch", 0)), attempts - 1)})
    if POLICY_VERSION not in state:
        return 0
    finished = recoverable(run_dir, state, pool.k)
    if finished:
        pool.launcher = Recovered(pool.launcher, finished)
    return len(finished)


def recoverable(run_dir: Path, state: dict[str, Any], staleness: int) -> dict[Slot, TrialResult]:
    """Finished trials in the run store that the resumed pool may still launch: members of
    groups at or after the checkpoint's open ones, not infrastructure failures, sampled with
    no policy version after the checkpoint's (and none too stale to train at it)."""
    version = int(state[POLICY_VERSION])
    pending = [g["seq"] for g in state.get("open", []) if None in g["members"]]
    first = min(pending, default=int(state.get("seq", 0)))
    found: dict[Slot, TrialResult] = {}
    if not (run_dir / STORE_FILE).is_file():
        return found
    wanted: list[tuple[Slot, dict[str, Any]]] = []
    for summary in read_trials(run_dir, min_step=version - staleness - 1):
        slot = slot_of(summary)
        if slot is None or slot[0] < first:
            continue
        if summary.get("attribution") == Attribution.INFRASTRUCTURE.value:
            continue
        if summary.get("termination") == Termination.CANCELLED.value:
            continue
        versions = [summary.get("step", 0)] + [v for v, _ in summary.get("call_versions", [])]
        if max(versions) <= version:
            wanted.append((slot, summary))
    # a trial whose trajectory is gone from the store is run again
    results = read_results(run_dir, [summary for _, summary in wanted])
    found.update((slot, r) for (slot, _), r in zip(wanted, results, strict=True) if r is not None)
    return found


def slot_of(trial: dict[str, Any]) -> Slot | None:
    """The slot of a stored trial, from the pool's names: group ``g<seq>-<task>[-e<epoch>]``,
    trial ``<group>-<index>[-r<attempt>][-e<epoch>]``; None for other names."""
    group, trial_id = trial.get("group", ""), trial.get("trial_id", "")
    task = trial.get("task", "")
    named = re.fullmatch(rf"g(\d+)-{re.escape(task)}(-e\d+)?", group)
    member = re.fullmatch(r"(\d+)(-r\d+)?(-e\d+)?", trial_id.removeprefix(f"{group}-"))
    if named is None or member is None or not trial_id.startswith(f"{group}-"):
        return None
    return int(named[1]), task, int(member[1])


class Recovered:
    """A :class:`Launcher` that answers a job whose slot a killed run already finished with
    that result (at once: the pool's lock is re-entrant) and launches the others."""

    def __init__(self, inner: Launcher, finished: dict[Slot, TrialResult]):
        self.inner, self.finished = inner, dict(finished)
        self.reused: list[str] = []

    def launch(self, job: Job, done: Callable[[TrialResult], None]) -> None:
        result = self.finished.pop((job.group.seq, job.task.name, job.index), None)
        if result is None:
            self.inner.launch(job, done)
            return
        self.reused.append(result.trial_id)
        done(result)

    def abort(self, job: Job, why: str = "") -> TrialResult:
        return self.inner.abort(job, why)
