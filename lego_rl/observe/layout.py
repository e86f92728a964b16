"""The run store's tables (schema 2) and how a store of another schema is told apart.

``events`` orders every event (what a live reader polls: its largest id grows with each);
what an event carries is kept once, where it is queried: ``trials`` (one row per trial, the
TrialResult without trajectories as a compressed JSON blob), ``trajectories`` (token-exact,
per trial and slot), ``calls`` (the record's fields as columns and JSON, its token arrays as
a blob), ``steps`` (metrics JSON). ``dictionaries`` holds what blobs are compressed against.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

STORE_FILE = "store.sqlite"
SCHEMA_VERSION = 2
MIGRATE = "python -m lego_rl.observe.migrate"
"""The command that converts a run directory of schema 1."""

SCHEMA = f"""
BEGIN;
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
    time REAL NOT NULL,
    step INTEGER,
    task TEXT,
    grp TEXT,
    reward REAL,
    termination TEXT,
    attribution TEXT,
    reason TEXT,
    calls INTEGER,
    trained_tokens INTEGER,
    flagged INTEGER NOT NULL,
    result BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS trajectories (
    trial_id TEXT NOT NULL,
    slot INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (trial_id, slot)
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
    record TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (session, idx)
);
CREATE TABLE IF NOT EXISTS dictionaries (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    data BLOB NOT NULL
);
PRAGMA user_version = {SCHEMA_VERSION};
COMMIT;
"""
CALL_COLUMNS = {"session": "session", "index": "idx", "prompt_tokens": "prompt_tokens",
                "completion_tokens": "completion_tokens", "finish_reason": "finish_reason",
                "extends_previous": "extends_previous", "policy_version": "policy_version",
                "error": "error"}  # fmt: skip
"""Fields of a call's record kept as columns of ``calls`` (the rest is its ``record`` JSON)."""
MAIN_SLOT = 0
"""``trajectories.slot`` of the main agent's trajectory; sub-agents' are 1, 2, ..."""
TOKENS, JSON = "tokens", "json"
"""The two kinds of dictionary: for token arrays, for trial summaries."""


class StoreVersionError(ValueError):
    """A store of another schema than this lego-rl reads."""


def schema_version(db: sqlite3.Connection) -> int:
    """The store's schema: 0 for an empty file, 1 for the first (JSON) layout, else its
    ``user_version``."""
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version:
        return version
    tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return 1 if "events" in tables else 0


def check_version(db: sqlite3.Connection, path: Path) -> None:
    version = schema_version(db)
    if version == 1:
        raise StoreVersionError(
            f"{path} is a run store of schema 1 (JSON events beside trajectories/*.json, before "
            f"lego-rl's compact store); this lego-rl reads schema {SCHEMA_VERSION}: convert the "
            f"run directory with `{MIGRATE} {path.parent}`"
        )
    if version > SCHEMA_VERSION:
        raise StoreVersionError(
            f"{path} is a run store of schema {version}, written by a newer lego-rl; this one "
            f"reads schema {SCHEMA_VERSION}: upgrade lego-rl to read it"
        )


def open_readonly(run_dir: Path) -> sqlite3.Connection:
    """A read-only connection (``mode=ro``) to a store this lego-rl reads."""
    path = Path(run_dir) / STORE_FILE
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        check_version(db, path)
    except BaseException:
        db.close()
        raise
    return db
