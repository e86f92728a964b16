"""The run store: an append-only SQLite database in the run directory (schema 2).

Each event is a row of ``events``; what it carries is kept once, where it is queried
(:mod:`lego_rl.observe.layout`): a trial in ``trials`` (the TrialResult without trajectories),
its token-exact trajectories in ``trajectories``, a call in ``calls`` (its token arrays a blob
holding the prompt as a reference to an earlier call's context plus what it appends,
:mod:`lego_rl.observe.prompts`), step metrics in ``steps``; the ``call`` and ``trial_end``
events themselves only name their call or trial. A trajectory the proxy assembled from the
trial's calls is stored as those calls' indices, so its tokens are kept once. Blobs are
binary columns (:mod:`lego_rl.observe.codec`) compressed against a dictionary: token arrays
against the start of the first call stored, trial summaries against the first summary. WAL
mode lets a dashboard read while the run writes.

A store of schema 1 (JSON events beside ``trajectories/*.json``) is converted by
``python -m lego_rl.observe.migrate RUN_DIR``; readers refuse it with that advice.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from lego_rl.data import CallRecord, Trajectory, TrialResult
from lego_rl.kinds import Event
from lego_rl.observe import codec, decode
from lego_rl.observe.layout import (
    CALL_COLUMNS,
    JSON,
    MAIN_SLOT,
    MIGRATE,
    SCHEMA,
    SCHEMA_VERSION,
    STORE_FILE,
    TOKENS,
    StoreVersionError,
    check_version,
    open_readonly,
    schema_version,
)
from lego_rl.observe.prompts import SESSIONS, Contexts, by_reference, call_payload, light_record

__all__ = [
    "EVAL_GROUP_PREFIX", "MAIN_SLOT", "MIGRATE", "SCHEMA_VERSION", "STORE_FILE", "RunStore",
    "StoreVersionError", "count_events", "light_data", "open_readonly", "read_calls",
    "read_results", "read_reward_hacking", "read_steps", "read_trajectory", "read_trials",
    "reward_hacking", "schema_version", "to_json", "trial_summary",
]  # fmt: skip

EVAL_GROUP_PREFIX = "eval-"
"""Groups of held-out evaluation trials (never part of a training step)."""
DETAILS = ("harness", "verifier")
"""A trial's bulky details (transcripts, test output): in the store, not in a light log."""


class RunStore:
    """Writes run events to ``run_dir/store.sqlite`` (thread-safe)."""

    def __init__(self, run_dir: Path, file: str = STORE_FILE):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / file
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._dictionaries: dict[str, tuple[int, bytes]] = {}
        self._contexts = Contexts()
        self._calls: dict[str, dict[int, CallRecord]] = {}
        """Each live session's calls whose tokens are stored, until its trial ends."""

    @property
    def _db(self) -> sqlite3.Connection:
        """Opened on the first event, so building the observer writes nothing."""
        if self._conn is None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            try:
                check_version(conn, self.path)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(SCHEMA)
            except BaseException:
                conn.close()
                raise
            rows = conn.execute("SELECT id, kind, data FROM dictionaries ORDER BY id DESC")
            self._dictionaries = {kind: (int(i), bytes(data)) for i, kind, data in rows}
            self._conn = conn
        return self._conn

    def emit(self, event: Event) -> None:
        with self._lock:
            self.write(event.kind, dict(event.data), event.time or time.time())

    def write(self, kind: str, data: dict[str, Any], at: float, **old: Any) -> None:
        """One event in one transaction (``old``: what a converted schema-1 store lacks, see
        :meth:`_write_call` and :meth:`_write_trial`)."""
        db, dictionaries = self._db, dict(self._dictionaries)
        db.execute("BEGIN")
        try:
            if kind == "trial_end" and "result" in data:
                data["trial_id"] = self._write_trial(data.pop("result"), at, **old)
            elif kind == "call" and "record" in data:
                data["call"] = self._write_call(data.pop("record"), **old)
            elif kind == "step":
                db.execute(
                    "INSERT OR REPLACE INTO steps VALUES (?, ?, ?)",
                    (int(data.get("step", 0)), at, to_json(data)),
                )
            db.execute(
                "INSERT INTO events (time, kind, data) VALUES (?, ?, ?)", (at, kind, to_json(data))
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            self._dictionaries = dictionaries  # one made in the transaction is gone with it
            raise

    def _blob(self, payload: bytes, kind: str = TOKENS) -> bytes:
        """``payload`` compressed against the store's dictionary of ``kind`` (made from it
        when there is none yet)."""
        if kind not in self._dictionaries:
            data = codec.make_dictionary(payload)
            cursor = self._db.execute(
                "INSERT INTO dictionaries (kind, data) VALUES (?, ?)", (kind, data)
            )
            self._dictionaries[kind] = (int(cursor.lastrowid or 0), data)
        dictionary_id, dictionary = self._dictionaries[kind]
        return codec.compress(payload, dictionary, dictionary_id)

    def _write_trial(
        self, result: TrialResult | dict[str, Any], at: float, *, lost: bool = False
    ) -> str:
        """``lost``: the trial had a main trajectory that is gone (a trimmed schema-1 store);
        its summary says so, so that a resumed run never takes it for one without."""
        if isinstance(result, dict):
            result = TrialResult.model_validate(result)
        self._contexts.forget(result.trial_id)
        records = self._calls.pop(result.trial_id, {})
        self._db.execute("DELETE FROM trajectories WHERE trial_id = ?", (result.trial_id,))
        slots = [(MAIN_SLOT, result.trajectory)] if result.trajectory is not None else []
        slots += list(enumerate(result.subagents, start=MAIN_SLOT + 1))
        for slot, trajectory in slots:
            payload = by_reference(trajectory, records) or codec.trajectory_payload(trajectory)
            self._db.execute(
                "INSERT INTO trajectories VALUES (?, ?, ?, ?)",
                (result.trial_id, slot, trajectory.trained_tokens, self._blob(payload)),
            )
        summary = trial_summary(result)
        summary["trajectories"]["main"] |= lost
        self._db.execute(
            "INSERT OR REPLACE INTO trials VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                result.trial_id,
                at,
                result.step,
                result.task,
                result.group,
                result.reward,
                result.termination.value,
                result.attribution.value,
                result.reason,
                result.calls,
                result.trajectory.trained_tokens if result.trajectory is not None else 0,
                int(bool(result.verifier.get("reward_hacking"))),
                self._blob(to_json(summary).encode(), JSON),
            ),
        )
        return result.trial_id

    def _write_call(
        self, record: CallRecord | dict[str, Any], *, prompt_tokens: int | None = None
    ) -> list[Any]:
        """``prompt_tokens``: the record's prompt ids are unknown (a converted schema-1 store
        kept only their number), and this is it."""
        if isinstance(record, dict):
            record = CallRecord.model_validate(record)
        known = prompt_tokens is None
        light = light_record(record)
        if not known:
            light["prompt_tokens"] = prompt_tokens
        payload = call_payload(record, self._contexts, prompt_known=known)
        if known:
            self._calls.setdefault(record.session, {})[record.index] = record
            while len(self._calls) > SESSIONS:  # sessions whose trial never ended
                self._calls.pop(next(iter(self._calls)))
        self._db.execute(
            "INSERT OR REPLACE INTO calls VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                record.session,
                record.index,
                light["prompt_tokens"],
                len(record.completion_ids),
                record.finish_reason,
                int(record.extends_previous),
                record.policy_version,
                record.ended_at - record.started_at,
                record.error,
                to_json({k: v for k, v in light.items() if k not in CALL_COLUMNS}),
                self._blob(payload),
            ),
        )
        return [record.session, record.index]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def trial_summary(result: TrialResult) -> dict[str, Any]:
    """The TrialResult as JSON without its trajectories, with what was stored of them."""
    summary = result.model_dump(mode="json", exclude={"trajectory", "subagents"})
    summary["trajectories"] = {
        "main": result.trajectory is not None,
        "subagents": len(result.subagents),
    }
    return summary


def light_data(kind: str, data: dict[str, Any], *, details: bool = False) -> dict[str, Any]:
    """An event's data as JSON without token arrays or trajectories (what an event log keeps
    beside the store): a call's record with its sizes, a trial's summary (without the
    harness's and verifier's details unless ``details``)."""
    out = json.loads(to_json({k: v for k, v in data.items() if k not in ("record", "result")}))
    if kind == "call" and "record" in data:
        record = data["record"]
        out["record"] = light_record(
            record if isinstance(record, CallRecord) else CallRecord.model_validate(record)
        )
    elif kind == "trial_end" and "result" in data:
        result = data["result"]
        summary = trial_summary(
            result if isinstance(result, TrialResult) else TrialResult.model_validate(result)
        )
        out["result"] = summary if details else {
            k: v for k, v in summary.items() if k not in DETAILS
        }  # fmt: skip
    return out


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


# ---------------------------------------------------------------------------------- reading


def read_steps(run_dir: Path) -> list[dict[str, Any]]:
    """Step metrics in order (for reports and tests)."""
    db = open_readonly(run_dir)
    try:
        return [json.loads(m) for (m,) in db.execute("SELECT metrics FROM steps ORDER BY step")]
    finally:
        db.close()


def read_trials(run_dir: Path, min_step: int | None = None) -> list[dict[str, Any]]:
    """Finished trials (TrialResult JSON without trajectories) in the order they were stored;
    with ``min_step``, only those started at that policy version or later."""
    db = open_readonly(run_dir)
    where, args = ("WHERE step >= ?", (min_step,)) if min_step is not None else ("", ())
    dictionaries = decode.Dictionaries()
    try:
        rows = db.execute(f"SELECT result FROM trials {where} ORDER BY rowid", args).fetchall()
        return [dictionaries.summary(db, r) for (r,) in rows]
    finally:
        db.close()


def read_trajectory(run_dir: Path, trial_id: str) -> Trajectory | None:
    """The main agent's trajectory of a stored trial (None when it has none)."""
    db = open_readonly(run_dir)
    try:
        return decode.trajectories(db, trial_id).get(MAIN_SLOT)
    finally:
        db.close()


def read_calls(run_dir: Path, session: str) -> list[CallRecord]:
    """The calls of one proxy session (a trial's id) with their token arrays, by index."""
    db = open_readonly(run_dir)
    try:
        return decode.calls(db, session)
    finally:
        db.close()


def read_results(run_dir: Path, summaries: list[dict[str, Any]]) -> list[TrialResult | None]:
    """Each stored trial with its trajectories put back (None where one is gone)."""
    db = open_readonly(run_dir)
    dictionaries = decode.Dictionaries()
    try:
        return [decode.result_of(db, s, dictionaries) for s in summaries]
    finally:
        db.close()


REWARD_HACKING_SQL = f"""
SELECT step, SUM(flagged), SUM(reward > 0), SUM(reward > 0 AND flagged)
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
    db = open_readonly(run_dir)
    try:
        return reward_hacking(db)
    finally:
        db.close()


def count_events(run_dir: Path, kind: str) -> int:
    """How many ``kind`` events the run's store holds (0 without a store; any schema)."""
    if not (Path(run_dir) / STORE_FILE).is_file():
        return 0
    db = sqlite3.connect(f"file:{Path(run_dir) / STORE_FILE}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT COUNT(*) FROM events WHERE kind = ?", (kind,)).fetchone()[0])
    except sqlite3.OperationalError:  # no event written yet: no tables
        return 0
    finally:
        db.close()
