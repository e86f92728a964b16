"""What a run's record takes on disk: the run store, its event files, schema-1 trajectory files;
per trial and per call. ``python -m lego_rl.observe.footprint RUN_DIR...`` prints it.

Sandbox files (``trials/``), checkpoints and the report are not the run store and not counted.
"""

from __future__ import annotations

import argparse
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path

from lego_rl.observe.store import STORE_FILE

EVENT_FILES = ("events*.jsonl", "events*.jsonl.gz")
"""The ``jsonl`` observer's file and its rotated parts (its default name)."""


@dataclass(frozen=True)
class Footprint:
    run_dir: str
    trials: int
    calls: int
    store_bytes: int
    """store.sqlite with its write-ahead log."""
    event_bytes: int
    trajectory_bytes: int
    """trajectories/*.json (schema 1 only; schema 2 keeps them in the store)."""

    @property
    def total_bytes(self) -> int:
        return self.store_bytes + self.event_bytes + self.trajectory_bytes

    @property
    def bytes_per_trial(self) -> float:
        return self.total_bytes / self.trials if self.trials else 0.0

    @property
    def bytes_per_call(self) -> float:
        return self.total_bytes / self.calls if self.calls else 0.0

    def line(self) -> str:
        return (
            f"{self.run_dir}: {self.trials} trials, {self.calls} calls; store "
            f"{self.store_bytes / 1e6:.2f} MB, events {self.event_bytes / 1e6:.2f} MB, "
            f"trajectory files {self.trajectory_bytes / 1e6:.2f} MB; "
            f"{self.bytes_per_trial / 1e3:.1f} KB per trial, {self.bytes_per_call / 1e3:.1f} KB "
            "per call"
        )


def _size(paths: list[Path]) -> int:
    return sum(p.stat().st_size for p in paths if p.is_file())


def footprint(run_dir: Path) -> Footprint:
    run_dir = Path(run_dir)
    store = run_dir / STORE_FILE
    trials = calls = 0
    if store.is_file():
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        try:
            trials = int(db.execute("SELECT COUNT(*) FROM trials").fetchone()[0])
            calls = int(db.execute("SELECT COUNT(*) FROM calls").fetchone()[0])
        except sqlite3.OperationalError:  # no table yet
            pass
        finally:
            db.close()
    stores = [store, store.with_name(STORE_FILE + "-wal")]  # -shm: an index, not data
    events = sorted({p for pattern in EVENT_FILES for p in run_dir.glob(pattern)})
    trajectories = list((run_dir / "trajectories").glob("*.json"))
    return Footprint(str(run_dir), trials, calls, _size(stores), _size(events),
                     _size(trajectories))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true", help="one JSON object per run")
    args = parser.parse_args(argv)
    for run_dir in args.run_dirs:
        found = footprint(run_dir)
        if args.json:
            import json

            print(json.dumps({**asdict(found), "bytes_per_trial": found.bytes_per_trial,
                              "bytes_per_call": found.bytes_per_call}))  # fmt: skip
        else:
            print(found.line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
