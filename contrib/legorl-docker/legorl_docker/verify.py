"""What of the agent's container crosses into the verification container, and applying it.

The changes come from ``docker diff`` of the agent's container (created from the sealed
starting state, so they are exactly the agent's); what each path now is (file, symlink, dir,
other) and a regular file's bytes come from the daemon's own tar of the task's roots (``docker
cp CONTAINER:ROOT -``: the daemon reads the container's files, nothing runs inside), and
:class:`lego_rl.crossing.CrossingPolicy` decides. The crossed files go into the fresh
verification container as one tar (regular files only: their bytes and permission bits, owned
by the trial user; a directory the agent added is made for them), deletions with ``rm``.
"""

from __future__ import annotations

import posixpath
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from legorl_std.sandbox.snapshot import diff_texts, text_of

from lego_rl.crossing import ChangeKind, Crossing, CrossingLimit, CrossingPolicy, FileChange, FileType
from legorl_docker.cli import DockerError
from legorl_docker.container import Container

MODE_BITS = 0o777
DIFF_FILE_CAP = 256 << 10
DIFF_FILES = 64
"""The agent's diff shows files up to this size, this many of them (the rest: named only)."""


@dataclass
class AgentTree:
    """The changed paths as they are in the agent's container."""

    changes: list[FileChange]
    files: dict[str, tuple[Path, int]] = field(default_factory=dict)
    """A crossing regular file's bytes (a host copy) and permission bits."""
    dirs: dict[str, int] = field(default_factory=dict)
    """A changed directory's permission bits (a crossing file's new parent needs them)."""
    packages: set[str] = field(default_factory=set)
    """Directories of the read roots that held ``__init__.py`` in the starting state."""
    texts: dict[str, bytes] = field(default_factory=dict)
    """The bytes of the changed regular files (within :data:`DIFF_FILE_CAP`), for the agent's diff."""

    def is_package(self, directory: str) -> bool:
        return directory in self.packages


def merge(
    earlier: list[tuple[ChangeKind, str]], later: list[tuple[ChangeKind, str]]
) -> list[tuple[ChangeKind, str]]:
    """Two ``docker diff`` lists, the later taken on a container created from a commit of the
    earlier one, as one list relative to the earlier one's image."""
    kinds: dict[str, ChangeKind] = dict((path, kind) for kind, path in earlier)
    for kind, path in later:
        before = kinds.get(path)
        if before is None:
            kinds[path] = kind
        elif kind == "deleted":
            if before == "added":
                del kinds[path]
            else:
                kinds[path] = "deleted"
        elif before == "deleted":
            kinds[path] = "modified"
    return [(kind, path) for path, kind in sorted(kinds.items())]


def read_agent_tree(
    container: Container, diff: list[tuple[ChangeKind, str]], policy: CrossingPolicy, store: Path
) -> AgentTree:
    """What each changed path is now in ``container``; the bytes of the files that cross."""
    wanted = {path: kind for kind, path in diff}
    tree = AgentTree([])
    tree.packages = {posixpath.dirname(p) for p, k in wanted.items() if k == "deleted" and p.endswith("/__init__.py")}
    found: dict[str, tuple[FileType, int]] = {}
    stored = 0
    for root in policy.roots:
        if not any(_under(p, root) and k != "deleted" for p, k in wanted.items()):
            continue
        with tempfile.TemporaryFile() as tar:
            try:
                container.get_tar(root, tar)
            except FileNotFoundError:
                continue  # the agent removed the root itself: its paths read as gone
            except DockerError as exc:  # names or depths the daemon cannot tar: the agent's doing
                raise CrossingLimit(f"the agent's files under {root} cannot be read: {exc.stderr[-300:]}") from exc
            tar.seek(0)
            parent = posixpath.dirname(root.rstrip("/")) or "/"
            with tarfile.open(fileobj=tar, mode="r|") as stream:
                for member in stream:
                    path = posixpath.normpath(posixpath.join(parent, member.name))
                    kind = wanted.get(path)
                    if posixpath.basename(path) == "__init__.py" and kind != "added":
                        tree.packages.add(posixpath.dirname(path))  # there at the start
                    if kind is None or kind == "deleted":
                        continue
                    what = _type(member)
                    found[path] = (what, member.size if what == "file" else 0)
                    if what == "dir":
                        tree.dirs[path] = member.mode & MODE_BITS
                    wanted_text = what == "file" and member.size <= DIFF_FILE_CAP and len(tree.texts) < DIFF_FILES
                    # the packages are known once the whole tar is read: keep the bytes of what may cross
                    crosses = policy.rule(FileChange(path, kind, what, member.size), lambda d: True) == ""
                    if what == "file" and crosses and stored <= policy.max_bytes:
                        source = stream.extractfile(member)
                        if source is not None:
                            copy = store / str(len(tree.files))
                            with open(copy, "wb") as out:
                                shutil.copyfileobj(source, out, 1 << 20)
                            stored += member.size
                            tree.files[path] = (copy, member.mode & MODE_BITS)
                            if wanted_text:
                                tree.texts[path] = copy.read_bytes()
                    elif wanted_text and (source := stream.extractfile(member)) is not None:
                        tree.texts[path] = source.read()
    for path, kind in wanted.items():
        if kind == "deleted":
            tree.changes.append(FileChange(path, "deleted", "none", 0))
        elif not any(_under(path, r) for r in policy.roots):
            tree.changes.append(FileChange(path, kind, "file", 0))  # outside: dropped
        else:
            what, size = found.get(path, ("other", 0))
            tree.changes.append(FileChange(path, kind, what, size))
    return tree


def agent_diff(tree: AgentTree, fresh: Container, roots: tuple[str, ...]) -> str:
    """The unified diff of the agent's changed regular files under the task's ``roots`` (its
    tree against the starting state, read from the fresh container before anything crosses)."""

    def files() -> Iterator[tuple[str, str, str | None, str | None]]:
        for change in tree.changes:
            if not any(_under(change.path, r) for r in roots):
                continue
            if change.type not in ("file", "none") or (change.type == "file" and change.path not in tree.texts):
                if change.type == "file":
                    yield change.path, change.kind, None, None  # past the diff's caps: named only
                continue
            after = text_of(tree.texts[change.path]) if change.kind != "deleted" else ""
            before = _file_text(fresh, change.path) if change.kind != "added" else ""
            yield change.path, change.kind, before, after

    return diff_texts(files())


def _file_text(container: Container, path: str) -> str | None:
    """A regular file's text in ``container`` ('' when it does not exist, None: binary, other)."""
    with tempfile.TemporaryFile() as tar:
        try:
            container.get_tar(path, tar)
        except FileNotFoundError:
            return ""
        except DockerError:
            return None
        tar.seek(0)
        with tarfile.open(fileobj=tar, mode="r|") as stream:
            for member in stream:
                source = stream.extractfile(member) if member.isreg() and member.size <= DIFF_FILE_CAP else None
                return text_of(source.read()) if source is not None else None
    return None


def apply(crossing: Crossing, tree: AgentTree, target: Container, user: tuple[int, int], added: set[str]) -> None:
    """Put the crossed changes into the verification container ``target``."""
    deleted = [c.path for c in crossing.crossed if c.kind == "deleted"]
    if deleted:
        listing = target.run_dir / "delete.list"
        listing.write_bytes(b"\0".join(p.encode("utf-8", "surrogateescape") for p in deleted))
        out = target.exec("xargs -0 rm -rf -- < /run/legorl/delete.list", timeout=300, cwd="/", user=(0, 0))
        listing.unlink(missing_ok=True)
        if out.exit_code != 0:
            raise CrossingLimit(f"the agent's deletions cannot be applied to the verification copy: {out.stderr[-300:]}")
    files = [c for c in crossing.crossed if c.kind != "deleted"]
    if not files:
        return
    uid, gid = user
    now = time.time()
    with tempfile.TemporaryFile() as buffer:
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            made: set[str] = set()
            for change in files:
                for directory in _parents(change.path):
                    if directory in added and directory not in made and directory in tree.dirs:
                        made.add(directory)
                        info = tarfile.TarInfo(directory.lstrip("/"))
                        info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, tree.dirs[directory] | 0o700, uid, gid
                        info.mtime = now
                        tar.addfile(info)
                if change.path not in tree.files:
                    raise CrossingLimit(f"{change.path} changed while it was read")
                source, mode = tree.files[change.path]
                info = tarfile.TarInfo(change.path.lstrip("/"))
                info.size = source.stat().st_size
                info.mode, info.uid, info.gid, info.mtime = mode, uid, gid, now
                with open(source, "rb") as data:
                    tar.addfile(info, data)
        buffer.seek(0)
        try:
            target.put_tar(buffer, "/")
        except DockerError as exc:
            raise CrossingLimit(f"the agent's change cannot be applied to the verification copy: {exc.stderr[-300:]}") from exc


def _parents(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def _type(member: tarfile.TarInfo) -> FileType:
    if member.isreg():
        return "file"
    if member.issym():
        return "symlink"
    if member.isdir():
        return "dir"
    return "other"


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


