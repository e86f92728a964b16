"""Copy-on-write trial file systems for the local sandbox.

A task's Dockerfile is materialised once per backend into a shared, read-only *lower*
directory (:class:`ImageCache`); each trial gets an overlayfs view of it whose *upper*
layer lives on a size-capped tmpfs (:class:`Overlay`), so starting a trial costs two
``mount`` calls whatever the repository's size, a trial cannot fill the host's disk, and
the agent's changes are exactly what the upper layer holds. Without root (no mounts),
:class:`CopySnapshot` copies the lower tree instead and finds changes by comparison.
"""

from __future__ import annotations

import ctypes
import difflib
import hashlib
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from legorl_std.sandbox.dockerfile import Image, materialise

MNT_DETACH = 2
DIFF_CAP = 1 << 20
"""Characters of unified diff kept (the rest is cut with a note)."""

_libc = ctypes.CDLL(None, use_errno=True)


class SnapshotError(OSError):
    """A trial file system could not be mounted or unmounted."""


@dataclass(frozen=True)
class Change:
    """One path the trial changed relative to its image (an in-sandbox absolute path)."""

    path: str
    kind: Literal["added", "modified", "deleted"]


class Snapshot(Protocol):
    merged: Path
    view: Path
    """The state changes are relative to (the image, or the sealed starting state)."""

    def mount(self) -> None: ...

    def seal(self) -> Sealed:
        """Freeze the current state as the starting state: the snapshot is no longer written,
        and what it returns is a base for new snapshots (``base=``) and their ``view``."""
        ...

    def unmount(self) -> None: ...

    def changes(self) -> list[Change]: ...

    def space_left(self) -> int | None:
        """Bytes the trial may still write (None: no cap of its own)."""
        ...


# ---------------------------------------------------------------- lower layers


class ImageCache:
    """Materialised task images under ``root``, built once per task and shared by trials.

    Files are group-owned by ``gid`` and group-writable so that every trial user (each with
    primary group ``gid``) may change them through its own upper layer.
    """

    def __init__(self, root: Path, gid: int | None):
        self.root, self.gid = root, gid
        self._images: dict[Path, tuple[Image, Path]] = {}
        self._locks: dict[Path, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, dockerfile: Path, base_env: dict[str, str]) -> tuple[Image, Path]:
        """(image, lower dir) of a Dockerfile, materialising it on first use."""
        key = dockerfile.resolve()
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._images:
                digest = hashlib.sha256(str(key).encode()).hexdigest()[:12]
                home = self.root / ".images" / f"{key.parent.parent.name}-{digest}"
                shutil.rmtree(home, ignore_errors=True)  # a previous process's copy may be stale
                lower = home / "fs"
                lower.mkdir(parents=True)
                try:
                    image = materialise(key, lower, base_env)
                except BaseException:
                    shutil.rmtree(home, ignore_errors=True)
                    raise
                if self.gid is not None:
                    share_with_group(lower, self.gid)
                self._images[key] = (image, lower)
            return self._images[key]


def share_with_group(root: Path, gid: int) -> None:
    """chgrp -R gid + g+w, symlinks untouched."""
    for directory, dirs, files in os.walk(root):
        for name in [".", *dirs, *files]:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                continue
            os.chown(path, info.st_uid, gid)
            os.chmod(path, stat.S_IMODE(info.st_mode) | stat.S_IWGRP | stat.S_IRGRP)


# ---------------------------------------------------------------- per-trial views


class Overlay:
    """overlayfs of ``lower`` (and a sealed ``base`` layer above it) at ``trial/<prefix>fs``;
    upper and work dirs on a tmpfs of ``size_mb`` at ``trial/<prefix>rw``."""

    def __init__(
        self,
        lower: Path,
        trial_dir: Path,
        size_mb: int | None,
        owner: tuple[int, int] | None,
        prefix: str = "",
        base: Sealed | None = None,
    ):
        self.lower, self.merged, self.rw = lower, trial_dir / f"{prefix}fs", trial_dir / f"{prefix}rw"
        self.size_mb, self.owner, self.base = size_mb, owner, base
        self.view = base.view if base else lower
        self._mounted: list[Path] = []

    @property
    def upper(self) -> Path:
        return self.rw / "upper"

    def mount(self) -> None:
        self.rw.mkdir()
        self.merged.mkdir()
        size = f",size={self.size_mb}m" if self.size_mb else ""
        _mount("tmpfs", self.rw, "tmpfs", f"mode=0755{size}")
        self._mounted.append(self.rw)
        (self.rw / "work").mkdir()
        self.upper.mkdir()
        if self.owner:
            os.chown(self.upper, *self.owner)
        lowers = [self.base.layer, self.lower] if self.base else [self.lower]
        _mount_overlay(self.merged, lowers, self.upper, self.rw / "work")
        self._mounted.append(self.merged)

    def seal(self) -> Sealed:
        """Unmount the merged view; the upper layer (kept on its tmpfs) becomes a read-only
        layer, shown merged with the image at ``trial/<prefix>start``."""
        if self.base is not None:
            raise SnapshotError("an overlay on a sealed base cannot be sealed again")
        merged = self._mounted.pop()
        if _libc.umount2(str(merged).encode(), MNT_DETACH) != 0:
            errno = ctypes.get_errno()
            raise SnapshotError(errno, f"umount {merged}: {os.strerror(errno)}")
        view = merged.parent / f"{merged.name.removesuffix('fs')}start"
        view.mkdir()
        _mount_overlay(view, [self.upper, self.lower], None, None)
        self._mounted.append(view)
        return Sealed(self.upper, view)

    def unmount(self) -> None:
        while self._mounted:
            path = self._mounted.pop()
            if _libc.umount2(str(path).encode(), MNT_DETACH) != 0:
                errno = ctypes.get_errno()
                raise SnapshotError(errno, f"umount {path}: {os.strerror(errno)}")

    def space_left(self) -> int | None:
        if self.rw not in self._mounted:
            return None  # unmounted (a stopped trial): nothing to measure
        info = os.statvfs(self.rw)
        return info.f_bavail * info.f_frsize

    def changes(self) -> list[Change]:
        found: list[Change] = []
        for directory, dirs, files in os.walk(self.upper):
            rel_dir = os.path.relpath(directory, self.upper)
            for name in sorted(dirs + files):
                rel = os.path.normpath(os.path.join(rel_dir, name))
                inside = "/" + rel
                try:
                    info = os.lstat(os.path.join(directory, name))
                except OSError:  # a path too long to name: listed, and read as "other" later
                    found.append(Change(inside, "modified"))
                    continue
                if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:
                    found.append(Change(inside, "deleted"))
                elif not stat.S_ISDIR(info.st_mode):
                    below = self.view / rel
                    if not os.path.lexists(below):
                        found.append(Change(inside, "added"))
                    elif not _same(below, self.merged / rel):
                        found.append(Change(inside, "modified"))
                elif _opaque(os.path.join(directory, name)):
                    found += _replaced_entries(self.view / rel, self.upper / rel, inside)
            dirs[:] = [d for d in dirs if not stat.S_ISCHR(os.lstat(os.path.join(directory, d)).st_mode)]
        return found


def _opaque(directory: str) -> bool:
    """Whether an upper dir hides its lower one (the agent removed it and made it anew)."""
    try:
        return os.getxattr(directory, "trusted.overlay.opaque", follow_symlinks=False) == b"y"
    except OSError:
        return False


def _replaced_entries(lower: Path, upper: Path, inside: str) -> list[Change]:
    """The entries of a lower dir that an opaque upper dir removed."""
    if not lower.is_dir() or lower.is_symlink():
        return []
    return [
        Change(f"{inside}/{name}", "deleted")
        for name in sorted(os.listdir(lower))
        if not os.path.lexists(upper / name)
    ]


@dataclass(frozen=True)
class Sealed:
    """A sealed starting state: a read-only ``layer`` above the image, and ``view``, the two
    merged (what a snapshot on this base compares its changes against)."""

    layer: Path
    view: Path


def _mount_overlay(target: Path, lowers: list[Path], upper: Path | None, work: Path | None) -> None:
    """Mount an overlay at ``target`` (read-only without ``upper``), its layers named by
    descriptor: the mount's options (in every mountinfo) show no host path."""
    for path in (*lowers, target):
        if any(c in str(path) for c in ",:\\"):
            raise SnapshotError(f"overlayfs cannot use a path with ',', ':' or '\\': {path}")
    fds = [os.open(p, os.O_PATH | os.O_DIRECTORY) for p in (*lowers, *((upper, work) if upper and work else ()))]
    try:
        names = [f"/proc/self/fd/{fd}" for fd in fds]
        options = "lowerdir=" + ":".join(names[: len(lowers)])
        if upper is not None:
            options += f",upperdir={names[-2]},workdir={names[-1]}"
        _mount("overlay", target, "overlay", options)
    finally:
        for fd in fds:
            os.close(fd)


class CopySnapshot:
    """A full copy of ``lower`` (or of a sealed ``base``) at ``trial/<prefix>fs`` (no mounts
    needed; cost grows with size)."""

    def __init__(
        self,
        lower: Path,
        trial_dir: Path,
        owner: tuple[int, int] | None = None,
        prefix: str = "",
        base: Sealed | None = None,
    ):
        self.lower = base.view if base else lower
        self.view, self.merged, self.owner = self.lower, trial_dir / f"{prefix}fs", owner

    def mount(self) -> None:
        shutil.copytree(self.lower, self.merged, symlinks=True)
        if self.owner:
            share_with_group(self.merged, self.owner[1])
            os.chown(self.merged, *self.owner)

    def unmount(self) -> None:
        pass

    def seal(self) -> Sealed:
        """The copy as it is now becomes the starting state (moved to ``<prefix>start``)."""
        start = self.merged.parent / f"{self.merged.name.removesuffix('fs')}start"
        os.rename(self.merged, start)
        return Sealed(start, start)

    def space_left(self) -> None:
        return None

    def changes(self) -> list[Change]:
        return compare_trees(self.lower, self.merged)


def compare_trees(lower: Path, upper: Path) -> list[Change]:
    """The files (regular files and symlinks; directories only by what they hold) added,
    modified or deleted from the tree ``lower`` to the tree ``upper``, as ``/relative`` paths."""
    found: list[Change] = []
    sides: tuple[tuple[Path, Path, Literal["added", "deleted"]], ...] = (
        (upper, lower, "added"),
        (lower, upper, "deleted"),
    )
    for base, other, kind in sides:
        for directory, _dirs, files in os.walk(base):
            for name in files:
                rel = os.path.relpath(os.path.join(directory, name), base)
                if not os.path.lexists(other / rel):
                    found.append(Change("/" + rel, kind))
                elif kind == "added" and not _same(lower / rel, upper / rel):
                    found.append(Change("/" + rel, "modified"))
    return sorted(found, key=lambda c: c.path)


def stale_mounts(root: Path, live: Callable[[str], bool]) -> list[Path]:
    """Mount points under ``root/<trial>/`` whose trial is not ``live`` (a killed process's
    leftovers), deepest first."""
    prefix = str(root.absolute()).rstrip("/") + "/"
    found: list[Path] = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = _unescape(line.split()[4])
        if point.startswith(prefix) and not live(point[len(prefix) :].split("/")[0]):
            found.append(Path(point))
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def unmount_stale(root: Path, live: Callable[[str], bool]) -> list[Path]:
    """Lazily unmount :func:`stale_mounts`; returns what was unmounted."""
    done = []
    for point in stale_mounts(root, live):
        if _libc.umount2(str(point).encode(), MNT_DETACH) == 0:
            done.append(point)
    return done


def _unescape(field: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes come as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def unified_diff(snapshot: Snapshot, lower: Path, changes: list[Change], prefixes: list[str]) -> str:
    """A unified diff (a/ = image, b/ = trial) of the changed files under ``prefixes``."""
    return tree_diff(lower, snapshot.merged, changes, prefixes)


def tree_diff(lower: Path, upper: Path, changes: list[Change], prefixes: list[str], inside: str = "") -> str:
    """A unified diff (a/ = ``lower``, b/ = ``upper``) of the changed files under ``prefixes``;
    a path is shown with ``inside`` before it (where the trees stand in the sandbox)."""
    own = (c for c in changes if any(c.path == p or c.path.startswith(p.rstrip("/") + "/") for p in prefixes))
    return diff_texts(
        (inside.rstrip("/") + c.path, c.kind, _text(lower / c.path.lstrip("/")) if c.kind != "added" else "",
         _text(upper / c.path.lstrip("/")) if c.kind != "deleted" else "")
        for c in own
    )  # fmt: skip


def diff_texts(files: Iterable[tuple[str, str, str | None, str | None]]) -> str:
    """A unified diff (a/ = before, b/ = after) of ``(path, kind, before, after)`` texts (None:
    binary or unreadable), cut at :data:`DIFF_CAP` characters; ``files`` is read lazily."""
    parts: list[str] = []
    size = 0
    for path, kind, old, new in files:
        if old is None or new is None:
            part = f"Binary file {path} {kind}\n"
        else:
            part = "".join(
                difflib.unified_diff(
                    old.splitlines(keepends=True),
                    new.splitlines(keepends=True),
                    "/dev/null" if kind == "added" else f"a{path}",
                    "/dev/null" if kind == "deleted" else f"b{path}",
                )
            )
        parts.append(part if part.endswith("\n") or not part else part + "\n\\ No newline at end of file\n")
        size += len(part)
        if size > DIFF_CAP:
            parts.append(f"[... diff cut at {DIFF_CAP} characters ...]\n")
            break
    return "".join(parts)


def text_of(data: bytes) -> str | None:
    """Bytes as text, or None when they are binary (a NUL early on, or not UTF-8)."""
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _same(a: Path, b: Path) -> bool:
    try:
        sa, sb = os.lstat(a), os.lstat(b)
    except OSError:
        return False
    if stat.S_IFMT(sa.st_mode) != stat.S_IFMT(sb.st_mode) or sa.st_size != sb.st_size:
        return False
    if stat.S_ISLNK(sa.st_mode):
        return os.readlink(a) == os.readlink(b)
    if not stat.S_ISREG(sa.st_mode):
        return True
    try:
        with open(a, "rb") as fa, open(b, "rb") as fb:
            while chunk := fa.read(1 << 16):
                if chunk != fb.read(1 << 16):
                    return False
    except OSError:
        return False
    return True


def _text(path: Path) -> str | None:
    """A file's text: '' if it is missing, None if it is binary, not a regular file (a FIFO
    the agent left must not block the reader) or cannot be read (a name too long)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    except OSError:
        return None
    return text_of(data)


def _mount(source: str, target: Path, fstype: str, options: str) -> None:
    if _libc.mount(source.encode(), str(target).encode(), fstype.encode(), 0, options.encode()) != 0:
        errno = ctypes.get_errno()
        raise SnapshotError(errno, f"mount -t {fstype} {target}: {os.strerror(errno)}")
