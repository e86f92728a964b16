"""What a run on several nodes needs from its filesystems, checked on the node that plans it.

verl's workers on every node run trials: they write the trials' records under the run
directory, read the tasks' files, and import lego-rl and its plugins from the same Python
environment path as the driver. The run directory must therefore be on a filesystem every node
mounts (a local disk would keep the other nodes' records on those nodes); the tasks' data and
the environment must be there too, or copied to the same path on every node.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lego_rl.kinds import Problem

SHARED_TYPES = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "cephfs",
        "glusterfs", "wekafs", "panfs", "orangefs", "afs", "ocfs2", "gfs2", "virtiofs",
    }
)
"""Filesystems that several machines mount (fuse ones are judged by their subtype below)."""
SHARED_FUSE = ("juicefs", "s3fs", "gcsfuse", "mountpoint-s3", "sshfs", "glusterfs", "ceph", "weka", "lustre", "rclone")
LOCAL_TYPES = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "tmpfs", "overlay", "f2fs", "vfat", "ramfs"})


def mounts(mountinfo: str | None = None) -> list[tuple[str, str]]:
    """(mount point, filesystem type) of this process's mounts, from /proc/self/mountinfo."""
    text = mountinfo if mountinfo is not None else Path("/proc/self/mountinfo").read_text()
    found = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])  # a space is \040
        found.append((point, fields[fields.index("-") + 1]))
    return found


def fs_type(path: Path, table: Iterable[tuple[str, str]]) -> str:
    """The type of the filesystem ``path`` is on (the longest mount point above it)."""
    target = str(path)
    best, kind = "", "unknown"
    for point, fstype in table:
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fstype
    return kind


def sharing(fstype: str) -> str:
    """shared, local or unknown."""
    base = fstype.removeprefix("fuse.")
    if fstype in SHARED_TYPES or (fstype.startswith("fuse.") and base.startswith(SHARED_FUSE)):
        return "shared"
    return "local" if fstype in LOCAL_TYPES else "unknown"


def task_paths(options: Mapping[str, Any], spec_dir: Path) -> list[Path]:
    """Files or directories a task source's options name (relative to the spec's directory)."""
    found: list[Path] = []
    for value in options.values():
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, str) and item and len(item) < 4096:
                path = Path(item).expanduser()
                path = path if path.is_absolute() else spec_dir / path
                if path.exists():
                    found.append(path.resolve())
    return found


def shared_path_problems(
    nodes: int, run_dir: Path, spec_dir: Path, tasks: Mapping[str, Any], table: Iterable[tuple[str, str]] | None = None
) -> list[Problem]:
    """Findings of ``legorl plan`` for a run on ``nodes`` > 1: the run directory on a local
    filesystem is fatal; the spec's directory, the task data and the Python environment on one
    are warnings (they may be copies at the same path on every node)."""
    if nodes <= 1:
        return []
    table = list(table if table is not None else mounts())
    paths = [
        ("run directory", run_dir, True, "every node writes its trials' records there"),
        ("spec directory", spec_dir.resolve(), False, "the workers resolve the spec's relative paths from it"),
        *(("task data", p, False, "the trials on every node read it") for p in task_paths(tasks, spec_dir)),
        ("Python environment", Path(sys.prefix).resolve(), False, "Ray starts every node's workers with this interpreter"),
    ]
    problems = []
    for what, path, needed, why in paths:
        fstype = fs_type(_existing(path), table)
        verdict = sharing(fstype)
        if verdict == "shared":
            continue
        problems.append(
            Problem(
                f"{nodes} nodes: the {what} {path} is on a {verdict} filesystem ({fstype}); {why}",
                fix=(
                    "put it on a filesystem every node mounts (NFS, Lustre, CephFS, ...)"
                    + ("" if needed else ", or copy it to the same path on every node")
                ),
                fatal=needed and verdict == "local",
            )
        )
    return problems


def _existing(path: Path) -> Path:
    """``path`` resolved, or its nearest existing parent (a run directory not made yet)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path.resolve()
