"""Pristine verification for the local sandbox: the agent's crossing changes, applied to a
fresh snapshot of the task's image (see :mod:`lego_rl.crossing` for what crosses).

Nothing of the agent's copy is trusted while applying: every target is resolved inside the
fresh tree (a symlink of the image cannot lead a write out of it), sources are opened without
following symlinks, and only regular files' bytes and permission bits (no set-id bits) cross.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from lego_rl.crossing import Crossing, FileChange, FileType
from legorl_std.sandbox.snapshot import Change

MODE_BITS = 0o777


def file_changes(changes: list[Change], merged: Path) -> list[FileChange]:
    """``changes`` with what each path is now in the agent's tree ``merged``."""
    found = []
    for change in changes:
        kind: FileType = "none"
        size = 0
        if change.kind != "deleted":
            try:
                info = os.lstat(merged / change.path.lstrip("/"))
            except OSError:
                kind = "other"
            else:
                kind, size = _type(info.st_mode), info.st_size
        found.append(FileChange(change.path, change.kind, kind, size))
    return found


def apply(crossing: Crossing, source: Path, target: Path, owner: tuple[int, int] | None) -> None:
    """Apply the crossed changes of the agent's tree ``source`` to the fresh tree ``target``."""
    for change in crossing.crossed:
        rel = change.path.lstrip("/")
        destination = _inside(target, rel)
        if change.kind == "deleted":
            _remove(destination)
            continue
        _make_parents(target, destination.parent, owner)
        _copy_file(source / rel, destination, owner)


def _copy_file(src: Path, dst: Path, owner: tuple[int, int] | None) -> None:
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{src} is no longer a regular file")
        _remove(dst)
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with open(fd, "rb", closefd=False) as reader, open(out, "wb", closefd=False) as writer:
                shutil.copyfileobj(reader, writer, 1 << 20)
            if owner:
                os.fchown(out, *owner)
            os.fchmod(out, stat.S_IMODE(info.st_mode) & MODE_BITS)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _make_parents(root: Path, directory: Path, owner: tuple[int, int] | None) -> None:
    missing = []
    while not os.path.lexists(directory):
        missing.append(directory)
        directory = directory.parent
    if not directory.is_dir() or directory.is_symlink():
        _remove(directory)  # a file or link of the image where the agent made a directory
        missing.append(directory)
    for path in reversed(missing):
        _inside(root, str(path.relative_to(root)))
        path.mkdir(mode=0o755)
        if owner:
            os.chown(path, *owner)


def _inside(root: Path, rel: str) -> Path:
    """``root/rel``, refused when its parent resolves outside ``root``."""
    path = root / rel
    if not Path(os.path.realpath(path.parent)).is_relative_to(os.path.realpath(root)):
        raise OSError(f"{rel} resolves outside the verification copy")
    return path


def _remove(path: Path) -> None:
    if not os.path.lexists(path):
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _type(mode: int) -> FileType:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    return "other"
