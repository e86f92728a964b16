"""Read a run store without ever writing to it: safe while the run writes (WAL), many at once.

A store of another schema is refused, saying what to do (``store.StoreVersionError``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lego_rl.data import CallRecord, Trajectory
from lego_rl.observe import decode, store
from lego_rl.observe.layout import MAIN_SLOT, STORE_FILE, open_readonly


def is_run_dir(path: Path) -> bool:
    return (Path(path) / STORE_FILE).is_file()


def find_runs(paths: list[Path]) -> list[Path]:
    """Run directories named directly, or found one level below a directory of runs."""
    found: list[Path] = []
    for path in paths:
        path = Path(path).resolve()
        if is_run_dir(path):
            found.append(path)
        elif path.is_dir():
            found.extend(sorted(p for p in path.iterdir() if is_run_dir(p)))
    return list(dict.fromkeys(found))


@contextmanager
def connect(run_dir: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection (``mode=ro``): the dashboard cannot change a run."""
    db = open_readonly(run_dir)
    try:
        yield db
    finally:
        db.close()


class RunReader:
    """Queries of one run's store; every method opens and closes its own connection."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self._dictionaries = decode.Dictionaries()

    def version(self) -> int:
        """Grows with every event: a reader can tell whether anything changed."""
        with connect(self.run_dir) as db:
            return int(db.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0])

    def events(self, kind: str) -> list[tuple[float, dict[str, Any]]]:
        with connect(self.run_dir) as db:
            rows = db.execute("SELECT time, data FROM events WHERE kind = ? ORDER BY id", (kind,))
            return [(t, json.loads(d)) for t, d in rows]

    def info(self) -> dict[str, Any]:
        """Name, spec, status and times of the run. The status is the last ``run_end``'s
        (ok, failed, interrupted) unless a ``run_start`` came after it: then the run is
        running again (``resumed`` counts the restarts), and so is one that never ended."""
        starts, ends = self.events("run_start"), self.events("run_end")
        spec = starts[0][1].get("spec", {}) if starts else {}
        end = ends[-1] if ends and self._last_of("run_end", "run_start") == "run_end" else None
        return {
            "name": (spec.get("run") or {}).get("name") or self.run_dir.name,
            "run_dir": str(self.run_dir),
            "harness": (spec.get("harness") or {}).get("plugin", ""),
            "trainer": (spec.get("trainer") or {}).get("plugin", ""),
            "model": (spec.get("model") or {}).get("name", ""),
            "steps_planned": (spec.get("run") or {}).get("steps"),
            "spec": spec,
            "started": starts[0][0] if starts else None,
            "ended": end[0] if end else None,
            "status": end[1].get("status", "ended") if end else "running",
            "error": end[1].get("error") if end else None,
            "resumed": max(0, len(starts) - 1),
        }

    def _last_of(self, *kinds: str) -> str | None:
        """Which of ``kinds`` was written last (None if none was)."""
        marks = ", ".join("?" for _ in kinds)
        with connect(self.run_dir) as db:
            row = db.execute(
                f"SELECT kind FROM events WHERE kind IN ({marks}) ORDER BY id DESC LIMIT 1", kinds
            ).fetchone()
        return row[0] if row else None

    def steps(self) -> list[dict[str, Any]]:
        with connect(self.run_dir) as db:
            rows = db.execute("SELECT time, metrics FROM steps ORDER BY step")
            return [{**json.loads(m), "time": t} for t, m in rows]

    def trials(self) -> list[dict[str, Any]]:
        """Every finished trial (TrialResult JSON without trajectories), with its end time, in
        the order stored."""
        with connect(self.run_dir) as db:
            rows = db.execute("SELECT time, result FROM trials ORDER BY rowid").fetchall()
            return [{**self._dictionaries.summary(db, r), "time": t} for t, r in rows]

    def trial(self, trial_id: str) -> dict[str, Any] | None:
        with connect(self.run_dir) as db:
            row = db.execute(
                "SELECT time, result FROM trials WHERE trial_id = ?", (trial_id,)
            ).fetchone()
            return {**self._dictionaries.summary(db, row[1]), "time": row[0]} if row else None

    def reward_hacking(self) -> dict[int, dict[str, Any]]:
        """Per training step, trials the ``reward-hacking`` policy flagged (see
        :func:`lego_rl.observe.store.reward_hacking`)."""
        with connect(self.run_dir) as db:
            return store.reward_hacking(db)

    def calls(self, session: str | None = None) -> list[dict[str, Any]]:
        """Per-call token counts and latency (of one session when given)."""
        where = "WHERE session = ? ORDER BY idx" if session is not None else ""
        with connect(self.run_dir) as db:
            cols = [
                "session", "idx", "prompt_tokens", "completion_tokens",
                "finish_reason", "extends_previous", "policy_version", "seconds", "error",
            ]  # fmt: skip
            rows = db.execute(
                f"SELECT {', '.join(cols)} FROM calls {where}", (session,) if where else ()
            )
            return [dict(zip(cols, row, strict=True)) for row in rows]

    def call_records(self, session: str) -> list[dict[str, Any]]:
        """The calls of one proxy session (one trial) by index: each record as JSON without its
        prompt (``prompt_tokens`` says how long it was), with its completion and log-probs."""
        return [
            c.model_dump(mode="json", exclude={"prompt_ids", "prompt_routing", "routing"})
            | {"prompt_tokens": len(c.prompt_ids)}
            for c in self.calls_exact(session)
        ]

    def calls_exact(self, session: str) -> list[CallRecord]:
        """The calls of one session with every token array (prompt ids and routing too)."""
        with connect(self.run_dir) as db:
            return decode.calls(db, session, self._dictionaries)

    def trajectory(self, trial_id: str, slot: int = MAIN_SLOT) -> Trajectory | None:
        """A trial's trajectory (slot 0: the main agent's; None when not stored)."""
        with connect(self.run_dir) as db:
            return decode.trajectories(db, trial_id, self._dictionaries).get(slot)

    def proxy_tool_calls(self) -> dict[str, list[dict[str, Any]]]:
        """Tool calls the proxy recorded per session, where its call events carry them."""
        out: dict[str, list[dict[str, Any]]] = {}
        with connect(self.run_dir) as db:
            rows = db.execute(
                "SELECT session, json_extract(record, '$.tool_calls') FROM calls "
                "WHERE json_extract(record, '$.tool_calls') IS NOT NULL ORDER BY session, idx"
            )
            for session, calls in rows:
                out.setdefault(session, []).extend(json.loads(calls))
        return out
