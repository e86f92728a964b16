"""The local sandbox's trial users: as root each trial runs as a uid of its own (group
``uid_base``), held through a lock file shared by every process on the machine, and named
``agent`` by passwd/group files bound over ``/etc`` inside (never the host's files)."""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

UIDS_PER_BASE = 10000
UID_LOCKS = Path(tempfile.gettempdir()) / "legorl-uids"
"""One flock'ed file per trial uid in use, shared by every process on the machine."""


class NoFreeUid(RuntimeError):
    """Every trial uid above the base is held or has processes."""


def claim_uid(group: int, first: int) -> tuple[int, int, int]:
    """(uid, gid, lock fd): a uid above ``group`` that no other trial on this machine holds and
    no process runs as, searched from offset ``first``; closing the fd frees it."""
    UID_LOCKS.mkdir(mode=0o700, exist_ok=True)
    for step in range(UIDS_PER_BASE):
        uid = group + 1 + (first + step) % UIDS_PER_BASE
        fd = os.open(UID_LOCKS / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if not pids_of_uid(uid):
            return uid, group, fd
        os.close(fd)
    raise NoFreeUid(f"no free trial uid in {group + 1}..{group + UIDS_PER_BASE} (see {UID_LOCKS})")


def pids_of_uid(uid: int) -> list[int]:
    """Host pids of the processes owned by ``uid``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid == uid:
                pids.append(int(entry))
        except OSError:
            continue
    return pids


def write_identity(trial_dir: Path, user: tuple[int, int], home: str) -> None:
    """passwd/group files in ``trial_dir`` that add the trial user ``agent`` to the host's."""
    uid, gid = user
    for name, line in (("passwd", f"agent:x:{uid}:{gid}:agent:{home}:/bin/bash\n"), ("group", f"agent:x:{gid}:\n")):
        host = Path("/etc") / name
        text = host.read_text() if host.is_file() else ""
        (trial_dir / name).write_text(text + ("" if text.endswith("\n") or not text else "\n") + line)


def identity_fds(trial_dir: Path) -> list[tuple[int, str]]:
    """Fresh memory files holding the trial's passwd and group (one pair per command, read by
    bubblewrap, so no host path of them shows inside)."""
    found = []
    for name in ("passwd", "group"):
        fd = os.memfd_create(f"legorl-{name}", os.MFD_CLOEXEC)
        os.write(fd, (trial_dir / name).read_bytes())
        os.lseek(fd, 0, os.SEEK_SET)
        found.append((fd, name))
    return found
