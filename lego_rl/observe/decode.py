"""Rows of the run store read back: trial summaries, calls with their token arrays, and
trajectories (whole, or assembled again from the calls they were made of)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from lego_rl.data import CallRecord, Trajectory, TrialResult
from lego_rl.observe import codec
from lego_rl.observe.layout import CALL_COLUMNS, MAIN_SLOT
from lego_rl.observe.prompts import CallDecoder, from_reference


class Dictionaries:
    """The store's compression dictionaries, each read once (they never change)."""

    def __init__(self) -> None:
        self._known: dict[int, bytes] = {}

    def decode(self, db: sqlite3.Connection, blob: bytes) -> bytes:
        wanted = codec.dictionary_of(blob)
        if wanted and wanted not in self._known:
            row = db.execute("SELECT data FROM dictionaries WHERE id = ?", (wanted,)).fetchone()
            if row is None:
                raise codec.BlobError(f"the store has no dictionary {wanted}")
            self._known[wanted] = bytes(row[0])
        return codec.decompress(blob, self._known.get(wanted, b""))

    def summary(self, db: sqlite3.Connection, blob: bytes) -> dict[str, Any]:
        """A ``trials.result``: the TrialResult as JSON without trajectories."""
        return json.loads(self.decode(db, blob))


def trajectories(db: sqlite3.Connection, trial_id: str, dictionaries: Dictionaries | None = None
                 ) -> dict[int, Trajectory]:  # fmt: skip
    """Slot -> trajectory of one trial (slot 0: the main agent's)."""
    dictionaries = dictionaries or Dictionaries()
    rows = db.execute(
        "SELECT slot, data FROM trajectories WHERE trial_id = ? ORDER BY slot", (trial_id,)
    ).fetchall()
    out: dict[int, Trajectory] = {}
    records: dict[int, CallRecord] | None = None
    for slot, data in rows:
        payload = dictionaries.decode(db, data)
        header, _ = codec.unpack(payload)
        if header.get("ref") == "calls":
            if records is None:
                records = {c.index: c for c in calls(db, trial_id, dictionaries)}
            out[int(slot)] = from_reference(header, records)
        else:
            out[int(slot)] = codec.trajectory_from(payload)
    return out


CALL_SELECT = [*CALL_COLUMNS.values(), "record"]


def call_light(row: tuple[Any, ...]) -> dict[str, Any]:
    """A call's record without token arrays from the :data:`CALL_SELECT` columns of its row."""
    values = dict(zip(CALL_SELECT, row, strict=True))
    light = json.loads(values.pop("record"))
    light.update({field: values[column] for field, column in CALL_COLUMNS.items()})
    light["extends_previous"] = bool(light["extends_previous"])
    return light


def calls(db: sqlite3.Connection, session: str, dictionaries: Dictionaries | None = None
          ) -> list[CallRecord]:  # fmt: skip
    """Every call of one session with its token arrays, by index."""
    dictionaries = dictionaries or Dictionaries()
    rows = db.execute(
        f"SELECT {', '.join(CALL_SELECT)}, data FROM calls WHERE session = ? ORDER BY rowid",
        (session,),
    ).fetchall()
    decoded = CallDecoder().records(
        (call_light(row[:-1]), dictionaries.decode(db, row[-1])) for row in rows
    )
    return sorted(decoded, key=lambda c: c.index)


def result_of(db: sqlite3.Connection, summary: dict[str, Any],
              dictionaries: Dictionaries | None = None) -> TrialResult | None:  # fmt: skip
    """A stored trial with its trajectories put back (None when one of them is gone)."""
    stored = summary.get("trajectories") or {}
    found = trajectories(db, summary["trial_id"], dictionaries)
    fields = {k: v for k, v in summary.items() if k != "trajectories"}
    wanted = [MAIN_SLOT] if stored.get("main") else []
    wanted += list(range(MAIN_SLOT + 1, MAIN_SLOT + 1 + int(stored.get("subagents", 0))))
    if any(slot not in found for slot in wanted):
        return None
    fields["trajectory"] = found.get(MAIN_SLOT)
    fields["subagents"] = [found[s] for s in wanted if s != MAIN_SLOT]
    return TrialResult.model_validate(fields)
