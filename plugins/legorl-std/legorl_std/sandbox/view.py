"""What a local sandbox shows: a view built from parts, never the host with parts hidden.

The root inside is empty but for, read-only: the system base (:data:`SYSTEM_BASE`: ``/usr``,
``/etc``, the library dirs and their usrmerge symlinks: the task's ``python3`` in a
Dockerfile-materialised image) and the paths a harness or the spec exposes, each at its own
path (their missing parents as empty dirs). Not the interpreter lego-rl runs on: the packages
installed with it may hold the very fix a task asks for (a newer release of its project).
Whatever lego-rl and its plugins install under the shown paths (their packages, when not
editable installs) is covered by empty dirs (their metadata too: inside they are not
installed, and no entry point of theirs, e.g. our pytest plugin, loads), so the agent can run
no generator that rebuilds a task's solution.
The trial's own files, ``/dev``, ``/proc`` and a private ``/tmp`` are mounted by the sandbox.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import posixpath
import sys
from collections.abc import Iterable
from pathlib import Path

SYSTEM_BASE = frozenset({"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc"})
"""Top-level host dirs every command sees read-only (the base of a materialised image)."""
OWN_MOUNTS = frozenset({"dev", "proc", "tmp"})
"""Top-level dirs the sandbox mounts itself."""
ENTRY_POINT_GROUP = "lego_rl"


def root_view_args(targets: Iterable[str]) -> list[str]:
    """bwrap args that show the system base read-only, with room for every mount target.

    A target under the base whose path does not exist on the host needs writable parents to
    create its mount point in, so its nearest existing ancestors are rebuilt as directories
    whose children are bound one by one; everything else is one read-only bind per entry.
    """
    rebuilt = {"/"}
    for target in targets:
        if not in_base(target):
            continue
        real = posixpath.join(os.path.realpath(posixpath.dirname(target)), posixpath.basename(target))
        if os.path.lexists(real):
            continue
        parent = posixpath.dirname(real)
        while not os.path.isdir(parent):
            parent = posixpath.dirname(parent)
        while parent != "/":
            rebuilt.add(parent)
            parent = posixpath.dirname(parent)
    args: list[str] = []
    _replicate("/", rebuilt, args)
    return args


def in_base(path: str) -> bool:
    """Whether ``path`` lies in the system base (visible without a bind of its own)."""
    return path.lstrip("/").split("/")[0] in SYSTEM_BASE


def expose_args(exposed: Iterable[Path], made: set[str]) -> list[str]:
    """Read-only binds of ``exposed`` paths outside the system base, their missing parents
    made as 0755 dirs (``made`` collects the dirs made so far, shared with other mounts)."""
    argv: list[str] = []
    for path in sorted(set(exposed), key=lambda p: len(p.parts)):
        if in_base(str(path)) or not path.exists():
            continue
        argv += parent_dirs(str(path), made)
        argv += ["--ro-bind", str(path), str(path)]
    return argv


def parent_dirs(point: str, made: set[str]) -> list[str]:
    """``--dir`` args for the parents of ``point`` that the view does not have yet (bwrap
    would make them 0700); the base and the sandbox's own top-level mounts have theirs."""
    argv: list[str] = []
    for parent in reversed(Path(point).parents[:-1]):
        name = str(parent)
        if name in made or in_base(name) or (parent.parent == Path("/") and parent.name in OWN_MOUNTS):
            continue
        made.add(name)
        argv += ["--perms", "0755", "--dir", name]
    return argv


def own_packages(under: Iterable[Path]) -> list[Path]:
    """Installed files of lego-rl and of every plugin distribution (the ``lego_rl`` entry-point
    group) that lie under ``under``: the dirs and modules to cover inside."""
    roots = [Path(os.path.realpath(p)) for p in under]
    return sorted(p for p in _own_top_levels() if p.exists() and any(p.is_relative_to(r) for r in roots))


def cover_args(paths: Iterable[Path]) -> list[str]:
    """bwrap args that make each path an empty read-only dir (or an empty file)."""
    argv: list[str] = []
    for path in paths:
        if path.is_dir():
            argv += ["--perms", "0755", "--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            argv += ["--ro-bind", "/dev/null", str(path)]
    return argv


InstallState = tuple[tuple[str, tuple[int, ...] | None], ...]
"""Each ``sys.path`` entry with its dir's identity and change marks (None: missing)."""

_tops: tuple[InstallState, frozenset[Path]] | None = None
"""The install state :func:`_own_top_levels` last read, and what it found."""


def _own_top_levels() -> frozenset[Path]:
    """The real paths of every own distribution's top-level packages, modules and metadata
    dirs. Reading them parses every installed distribution's metadata (0.1 s of held GIL, once
    a trial: :meth:`LocalSandbox.provide`), so the answer is kept until the install state changes."""
    global _tops
    state = _install_state()
    if _tops is None or _tops[0] != state:
        importlib.invalidate_caches()  # importlib.metadata keys its path cache on a coarser mtime
        found = frozenset(Path(os.path.realpath(t)) for d in _own_distributions() for t in _top_levels(d))
        _tops = (state, found)
    return _tops[1]


def _install_state() -> InstallState:
    """``sys.path`` with each entry's mtime, size, link count and inode: installing or removing
    a distribution adds or removes its metadata dir in one of them, which changes the mtime, and
    the link count or size too (so a change within one clock tick is still seen)."""
    state: list[tuple[str, tuple[int, ...] | None]] = []
    for entry in sys.path:
        try:
            st = os.stat(entry or ".")
        except OSError:
            state.append((entry, None))
        else:
            state.append((entry, (st.st_mtime_ns, st.st_size, st.st_nlink, st.st_ino)))
    return tuple(state)


def _own_distributions() -> list[importlib.metadata.Distribution]:
    """lego-rl and every distribution with ``lego_rl`` entry points, each copy of them on
    ``sys.path`` (an editable install's metadata in site-packages beside a checkout's egg-info)."""
    names = {_normal(ep.dist.name) for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.dist}
    names.add("lego-rl")
    return [d for d in importlib.metadata.distributions() if _normal(d.metadata["Name"] or "") in names]


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _top_levels(dist: importlib.metadata.Distribution) -> set[Path]:
    """The top-level packages and modules a distribution installed, and its metadata dir (so
    that inside, the distribution is not installed at all: no entry point of it loads)."""
    tops: set[Path] = set()
    for file in dist.files or ():
        parts = file.parts
        if not parts or parts[0] in ("..", "__pycache__"):
            continue
        if (len(parts) == 1 and not file.name.endswith(".py")) or parts[0].startswith("__editable__"):
            continue  # .pth files and editable finders: they name paths, which are not inside
        tops.add(Path(str(dist.locate_file(parts[0]))))
    return tops


def _replicate(directory: str, rebuilt: set[str], args: list[str]) -> None:
    with os.scandir(directory) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if directory == "/" and entry.name not in SYSTEM_BASE:
                continue
            if entry.is_symlink():
                args += ["--symlink", os.readlink(entry.path), entry.path]
            elif entry.path in rebuilt:
                args += ["--dir", entry.path]
                _replicate(entry.path, rebuilt, args)
            elif entry.is_dir() or entry.is_file():
                args += ["--ro-bind", entry.path, entry.path]
