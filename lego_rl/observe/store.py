"""The run store: an append-only SQLite database in the run directory.

Every event is kept verbatim in ``events``; trials, steps and calls are also written to
their own tables for queries. Trajectories are written as JSON files beside it and
referenced by path. WAL mode lets a dashboard read while the run writes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from lego_rl.data import CallRecord, TrialResult
from lego_rl.kinds import Event

STORE_FILE = "store.sqlite"
EVAL_GROUP_PREFIX = "eval-"
"""Groups of held-out evaluation trials (never part of a training step)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS steps (
    step INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    metrics TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS trials (
    trial_id TEXT PRIMARY KEY,
    step INTEGER,
    task TEXT,
    grp TEXT,
    reward REAL,
    termination TEXT,
    attribution TEXT,
    reason TEXT,
    calls INTEGER,
    trained_tokens INTEGER,
    timings TEXT,
    trajectory_path TEXT,
    result TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS calls (
    session TEXT,
    idx INTEGER,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    finish_reason TEXT,
    extends_previous INTEGER,
    policy_version INTEGER,
    seconds REAL,
    error TEXT,
    PRIMARY KEY (session, idx)
);
"""


class RunStore:
    """Writes run events to ``run_dir/store.sqlite`` (thread-safe)."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / STORE_FILE
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    @property
    def _db(self) -> sqlite3.Connection:
        """Opened on the first event, so building the observer writes nothing."""
        if self._conn is None:
            (self.run_dir / "trajectories").mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(SCHEMA)
        return self._conn

    def emit(self, event: Event) -> None:
        data = dict(event.data)
        with self._lock:
            if event.kind == "trial_end" and "result" in data:
                data["result"] = self._write_trial(data["result"])
            elif event.kind == "call" and "record" in data:
                data["record"] = self._write_call(data["record"])
            elif event.kind == "step":
                self._db.execute(
                    "INSERT OR REPLACE INTO steps VALUES (?, ?, ?)",
                    (int(data.get("step", 0)), event.time or time.time(), to_json(data)),
                )
            self._db.execute(
                "INSERT INTO events (time, kind, data) VALUES (?, ?, ?)",
                (event.time or time.time(), event.kind, to_json(data)),
            )

    def _write_trial(self, result: TrialResult | dict[str, Any]) -> dict[str, Any]:
        if isinstance(result, dict):
            result = TrialResult.model_validate(result)
        traj_path = ""
        tokens = 0
        if result.trajectory is not None:
            path = self.run_dir / "trajectories" / f"{result.trial_id}.json"
            path.write_text(result.trajectory.model_dump_json())
            traj_path = str(path.relative_to(self.run_dir))
            tokens = result.trajectory.trained_tokens
        summary = result.model_dump(mode="json", exclude={"trajectory"})
        summary["trajectory_path"] = traj_path
        self._db.execute(
            "INSERT OR REPLACE INTO trials VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                result.trial_id,
                result.step,
                result.task,
                result.group,
                result.reward,
                result.termination.value,
                result.attribution.value,
                result.reason,
                result.calls,
                tokens,
                to_json([t.model_dump() for t in result.timings]),
                traj_path,
                to_json(summary),
            ),
        )
        return summary

    def _write_call(self, record: CallRecord | dict[str, Any]) -> dict[str, Any]:
        if isinstance(record, dict):
            record = CallRecord.model_validate(record)
        self._db.execute(
            "INSERT OR REPLACE INTO calls VALUES (?,?,?,?,?,?,?,?,?)",
            (
                record.session,
                record.index,
                len(record.prompt_ids),
                len(record.completion_ids),
                record.finish_reason,
                int(record.extends_previous),
                record.policy_version,
                record.ended_at - record.started_at,
                record.error,
            ),
        )
        return record.model_dump(mode="json", exclude={"prompt_ids", "prompt_routing", "routing"})

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def to_json(value: Any) -> str:
    return json.dumps(value, default=_json_default, sort_keys=True)


def _json_default(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(value)
    return str(value)


def read_steps(run_dir: Path) -> list[dict[str, Any]]:
    """Step metrics in order (for reports and tests)."""
    db = sqlite3.connect(f"file:{Path(run_dir) / STORE_FILE}?mode=ro", uri=True)
    try:
        return [json.loads(m) for (m,) in db.execute("SELECT metrics FROM steps ORDER BY step")]
    finally:
        db.close()


def read_trials(run_dir: Path, min_step: int | None = None) -> list[dict[str, Any]]:
    """Finished trials in the order they were stored; with ``min_step``, only those started
    at that policy version or later."""
    db = sqlite3.connect(f"file:{Path(run_dir) / STORE_FILE}?mode=ro", uri=True)
    where, args = ("WHERE step >= ?", (min_step,)) if min_step is not None else ("", ())
    try:
        rows = db.execute(f"SELECT result FROM trials {where} ORDER BY rowid", args)
        return [json.loads(r) for (r,) in rows]
    finally:
        db.close()


REWARD_HACKING_SQL = f"""
SELECT step,
       SUM(json_type(result, '$.verifier.reward_hacking') IS NOT NULL),
       SUM(reward > 0),
       SUM(reward > 0 AND json_type(result, '$.verifier.reward_hacking') IS NOT NULL)
FROM trials WHERE substr(COALESCE(grp, ''), 1, {len(EVAL_GROUP_PREFIX)}) != '{EVAL_GROUP_PREFIX}'
GROUP BY step ORDER BY step
"""
"""Per training step: trials flagged by the ``reward-hacking`` anti-cheat policy (those whose
verifier details hold a ``reward_hacking`` record), rewarded trials, and rewarded flagged ones."""


def reward_hacking(db: sqlite3.Connection) -> dict[int, dict[str, Any]]:
    """Per step: ``reward_hacking_flags`` (flagged trials) and ``reward_hacking_rewarded`` (the
    share of the step's rewarded trials that were flagged; None when none was rewarded)."""
    return {
        int(step or 0): {
            "reward_hacking_flags": int(flagged or 0),
            "reward_hacking_rewarded": (rewarded_flagged or 0) / rewarded if rewarded else None,
        }
        for step, flagged, rewarded, rewarded_flagged in db.execute(REWARD_HACKING_SQL)
    }


def read_reward_hacking(run_dir: Path) -> dict[int, dict[str, Any]]:
    """:func:`reward_hacking` of a run's store (for reports and tests)."""
    db = sqlite3.connect(f"file:{Path(run_dir) / STORE_FILE}?mode=ro", uri=True)
    try:
        return reward_hacking(db)
    finally:
        db.close()


def count_events(run_dir: Path, kind: str) -> int:
    """How many ``kind`` events the run's store holds (0 without a store)."""
    if not (Path(run_dir) / STORE_FILE).is_file():
        return 0
    db = sqlite3.connect(f"file:{Path(run_dir) / STORE_FILE}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT COUNT(*) FROM events WHERE kind = ?", (kind,)).fetchone()[0])
    except sqlite3.OperationalError:  # no event written yet: no tables
        return 0
    finally:
        db.close()
