"""A set of generated task directories, cached: written once into a scratch directory, then
renamed into place with ``manifest.json`` written last, so a set with a manifest is complete and
concurrent writers of the same set cannot leave a half-written one."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"


def cache_root(dir: str | None, ctx: Any, source: str) -> Path:
    """Where a task source keeps its generated sets: ``dir`` (relative to the spec) if given,
    else ``<run dir>/<source>``, else ``~/.cache/legorl/<source>`` (no run, e.g. ``plan``).
    ``ctx`` is the plugin's BuildContext."""
    if dir is not None:
        return ctx.path(dir)
    if ctx.run_dir is not None:
        return ctx.run_dir / source
    return Path("~/.cache/legorl").expanduser() / source


def cached_task_set(target: Path, write: Callable[[Path], dict[str, Any]]) -> list[Path]:
    """The task directories of the set at ``target``; if it is not complete yet, ``write(scratch)``
    writes one directory per task into ``scratch`` and returns the manifest, whose ``tasks`` lists
    their names in order."""
    if not (target / MANIFEST).is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            manifest = write(scratch)
            (scratch / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
            if target.exists():  # an incomplete set left by an interrupted run
                shutil.rmtree(target)
            os.replace(scratch, target)
        except OSError:
            if not (target / MANIFEST).is_file():  # not just another process winning the race
                raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    names = json.loads((target / MANIFEST).read_text(encoding="utf-8"))["tasks"]
    return [target / name for name in names]
