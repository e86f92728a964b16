"""Convert a run directory's store from schema 1 to schema 2 (the compact store).

Schema 1 kept every event as JSON in ``store.sqlite`` (calls without their prompt ids and
routing, trials twice) and each trajectory as ``trajectories/<trial>.json``; the ``jsonl``
observer's ``events.jsonl`` held every event in full. The conversion replays the old store's
events, in order, into a new schema-2 store, taking each call's prompt ids and routing from
``events.jsonl`` where it has them (else only their number is known) and each trajectory from
its file (or from ``events.jsonl``); checks that every event, trial, call and step arrived;
then puts the new store in place, removes the trajectory files it holds and rewrites
``events.jsonl`` as the light log the ``jsonl`` observer now writes. ``--keep`` leaves the old
store (as ``store.v1.sqlite``), the files and the log as they were.

    python -m lego_rl.observe.migrate RUN_DIR [RUN_DIR...] [--keep]

Stop a run before converting its directory; ``legorl apply`` converts one it resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from lego_rl.data import CallRecord, Trajectory, TrialResult
from lego_rl.observe.footprint import footprint
from lego_rl.observe.layout import SCHEMA_VERSION, STORE_FILE, StoreVersionError, schema_version
from lego_rl.observe.store import RunStore, light_data

EVENTS_FILE = "events.jsonl"
OLD_STORE = "store.v1.sqlite"
NEW_STORE = STORE_FILE + ".migrating"
SIDE_FILES = ("", "-wal", "-shm")


class MigrationError(RuntimeError):
    """The converted store does not hold what the old one did (the old one is left alone)."""


@dataclass(frozen=True)
class Migrated:
    run_dir: Path
    from_version: int
    bytes_before: int
    bytes_after: int
    trials: int
    calls: int
    prompts_from_log: int
    """Calls whose prompt ids and routing came from events.jsonl (the others keep a count)."""

    def line(self) -> str:
        if self.from_version == SCHEMA_VERSION:
            return f"{self.run_dir}: already schema {SCHEMA_VERSION}"
        if self.from_version == 0:
            return f"{self.run_dir}: no events stored yet, nothing to convert"
        return (
            f"{self.run_dir}: schema {self.from_version} -> {SCHEMA_VERSION}; "
            f"{self.trials} trials, {self.calls} calls ({self.prompts_from_log} with prompts "
            f"from {EVENTS_FILE}); "
            f"{self.bytes_before / 1e6:.1f} MB -> {self.bytes_after / 1e6:.1f} MB"
        )


def store_version(run_dir: Path) -> int:
    """The schema of the run directory's store (0: none, or no event yet)."""
    path = Path(run_dir) / STORE_FILE
    if not path.is_file():
        return 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return schema_version(db)
    finally:
        db.close()


def _index_log(path: Path) -> tuple[dict[tuple[Any, Any], int], dict[Any, int]]:
    """Byte offsets in a schema-1 events.jsonl of each call line, by (session, index), and of
    each trial_end line that holds a trajectory, by trial id (as the log has them: any JSON)."""
    calls: dict[tuple[Any, Any], int] = {}
    trials: dict[Any, int] = {}
    if not path.is_file():
        return calls, trials
    with path.open("rb") as log:
        offset = 0
        for line in log:
            head = line[:120]
            if b'"call"' in head or b'"trial_end"' in head:
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:  # a line cut short by a kill
                    event = {}
                data = event.get("data") or {}
                record, result = data.get("record"), data.get("result")
                kind = event.get("kind")
                if kind == "call" and isinstance(record, dict) and "prompt_ids" in record:
                    calls[(record.get("session"), record.get("index"))] = offset
                elif kind == "trial_end" and isinstance(result, dict):
                    if result.get("trajectory"):
                        trials[result.get("trial_id")] = offset
            offset += len(line)
    return calls, trials


def _line_at(path: Path, offset: int) -> dict[str, Any]:
    with path.open("rb") as log:
        log.seek(offset)
        return orjson.loads(log.readline())["data"]


def _remove(path: Path) -> None:
    for side in SIDE_FILES:
        path.with_name(path.name + side).unlink(missing_ok=True)


def _counts(db: sqlite3.Connection) -> dict[str, Any]:
    return {
        "events": Counter(dict(db.execute("SELECT kind, COUNT(*) FROM events GROUP BY kind"))),
        **{
            table: int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
            for table in ("trials", "calls", "steps")
        },
    }


def migrate(run_dir: Path, *, keep: bool = False) -> Migrated:
    """Convert ``run_dir``'s store to schema 2 (see the module doc); a no-op when it is."""
    run_dir = Path(run_dir)
    version = store_version(run_dir)
    if version > SCHEMA_VERSION:
        raise StoreVersionError(
            f"{run_dir / STORE_FILE} is of schema {version}, newer than this lego-rl "
            f"({SCHEMA_VERSION}): upgrade lego-rl"
        )
    before = footprint(run_dir)
    if version in (0, SCHEMA_VERSION):
        return Migrated(run_dir, version, before.total_bytes, before.total_bytes, 0, 0, 0)
    log = run_dir / EVENTS_FILE
    call_lines, trial_lines = _index_log(log)
    new = run_dir / NEW_STORE
    _remove(new)
    old = sqlite3.connect(f"file:{run_dir / STORE_FILE}?mode=ro", uri=True)
    writer = RunStore(run_dir, file=NEW_STORE)
    from_log = 0
    migrated_files: list[Path] = []
    try:
        rows = old.execute("SELECT session, idx, prompt_tokens FROM calls")
        prompts = {(s, i): n for s, i, n in rows}
        for at, kind, text in old.execute("SELECT time, kind, data FROM events ORDER BY id"):
            data = json.loads(text)
            if kind == "call" and isinstance(data.get("record"), dict):
                record = data["record"]
                key = (record.get("session"), record.get("index"))
                if key in call_lines:
                    full = _line_at(log, call_lines[key])["record"]
                    data["record"] = CallRecord.model_validate(full)
                    writer.write(kind, data, at)
                    from_log += 1
                else:
                    record = {**record, "prompt_ids": []}
                    count = prompts.get(key, 0)
                    writer.write(kind, {**data, "record": CallRecord.model_validate(record)}, at,
                                 prompt_tokens=count)  # fmt: skip
            elif kind == "trial_end" and isinstance(data.get("result"), dict):
                summary = dict(data["result"])
                relative = summary.pop("trajectory_path", "") or ""
                path = run_dir / relative if relative else None
                trajectory, lost = None, False
                if path is not None and path.is_file():
                    trajectory = Trajectory.model_validate_json(path.read_text())
                    migrated_files.append(path)
                elif summary.get("trial_id") in trial_lines:
                    stored = _line_at(log, trial_lines[summary["trial_id"]])["result"]
                    trajectory = Trajectory.model_validate(stored["trajectory"])
                else:
                    lost = bool(relative)
                result = TrialResult.model_validate({**summary, "trajectory": trajectory})
                writer.write(kind, {**data, "result": result}, at, lost=lost)
            else:
                writer.write(kind, data, at)
        writer.close()
        check = sqlite3.connect(new)  # not read-only: closing it removes its WAL files
        try:
            got, want = _counts(check), _counts(old)
        finally:
            check.close()
        if got != want:
            raise MigrationError(f"{run_dir}: the converted store holds {got}, the old one {want}")
    except BaseException:
        writer.close()
        _remove(new)
        raise
    finally:
        old.close()
    store = run_dir / STORE_FILE
    if keep:
        for side in SIDE_FILES:
            src = store.with_name(STORE_FILE + side)
            if src.exists():
                os.replace(src, run_dir / (OLD_STORE + side))
    else:
        _remove(store)
    os.replace(new, store)
    if not keep:
        for path in migrated_files:
            path.unlink(missing_ok=True)
        folder = run_dir / "trajectories"
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
        if log.is_file():
            _lighten(log)
    after = footprint(run_dir)
    return Migrated(run_dir, version, before.total_bytes, after.total_bytes, want["trials"],
                    want["calls"], from_log)  # fmt: skip


def _lighten(log: Path) -> None:
    """Rewrite a schema-1 events.jsonl as the light log (no token arrays, no trajectories)."""
    light = log.with_name(log.name + ".migrating")
    with log.open("rb") as src, light.open("w") as out:
        for line in src:
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            data = light_data(str(event.get("kind")), event.get("data") or {})
            out.write(json.dumps({"time": event.get("time"), "kind": event.get("kind"),
                                  "data": data}) + "\n")  # fmt: skip
    os.replace(light, log)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Convert run directories' stores to schema 2 (the compact store)."
    )
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument(
        "--keep", action="store_true",
        help=f"keep the old store ({OLD_STORE}), trajectories/ and {EVENTS_FILE} as they were",
    )  # fmt: skip
    args = parser.parse_args(argv)
    failed = 0
    for run_dir in args.run_dirs:
        try:
            print(migrate(run_dir, keep=args.keep).line())
        except (MigrationError, StoreVersionError, sqlite3.Error, OSError, ValueError) as exc:
            print(f"{run_dir}: not converted: {exc}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
