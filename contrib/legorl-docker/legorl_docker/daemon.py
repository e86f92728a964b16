"""lego-rl's own Docker daemon: no bridge, no NAT, its own data root and socket.

``python -m legorl_docker.daemon start|stop|status|host`` (``scripts/dockerd.sh`` runs it):
``dockerd --bridge=none --iptables=false --ip-forward=false --ip-masq=false``, so no container
or image build can get a network (the sandbox passes ``--network none`` as well; ``none`` is
then the only network there is), with every path apart from a user's daemon:

- socket ``/run/legorl-docker/docker.sock`` (``LEGORL_DOCKER_RUN``), exec root and log beside it;
- data root ``/var/lib/legorl-docker/data`` (``LEGORL_DOCKER_STATE``): a btrfs file system in a
  sparse image file (``LEGORL_DOCKER_DISK_GB``, default 32), mounted on start and unmounted on
  stop, because btrfs is the storage driver that caps a container's disk (``--storage-opt
  size``) where the kernel has no XFS/ext4 project quotas (simple quotas where the kernel has
  them: full qgroups cost a core for every deleted layer); without ``mkfs.btrfs`` or loop
  devices, overlay2 on a plain directory (no disk caps).

The daemon reaches no registry: its HTTP(S) proxy is a closed loopback port, so a pull fails at
once instead of resolving a name. Needs root. Standard library only (the script runs it without
the package installed). :func:`session` is what a test session uses: it starts the daemon when
none runs and stops it when the last session that needed it ends (a shared lock per session).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

STATE = Path(os.environ.get("LEGORL_DOCKER_STATE", "/var/lib/legorl-docker"))
RUN = Path(os.environ.get("LEGORL_DOCKER_RUN", "/run/legorl-docker"))
SOCKET = RUN / "docker.sock"
HOST = f"unix://{SOCKET}"
"""The daemon's address (``DOCKER_HOST`` / the docker sandbox's ``host`` option)."""
DISK_GB = int(os.environ.get("LEGORL_DOCKER_DISK_GB", "32"))
START_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
SIMPLE_QUOTA = Path("/sys/fs/btrfs/features/simple_quota")
BTRFS_IOC_QUOTA_CTL = (3 << 30) | (16 << 16) | (0x94 << 8) | 40
"""_IOWR(BTRFS_IOCTL_MAGIC, 40, struct btrfs_ioctl_quota_ctl_args {u64 cmd; u64 status;})."""
QUOTA_CTL_ENABLE_SIMPLE = 4
NO_REGISTRY = "http://127.0.0.1:9"
"""The daemon's HTTP(S) proxy: a closed port, so pulls fail without any lookup."""


class DaemonError(RuntimeError):
    """The daemon could not be started or stopped; the message says why and what to do."""


def running(sock: Path = SOCKET) -> bool:
    """Whether a Docker daemon answers ``/_ping`` on ``sock``."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(sock))
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            reply = s.recv(4096)
    except OSError:
        return False
    return reply.startswith(b"HTTP/1.") and b" 200 " in reply.split(b"\r\n", 1)[0] + b" "


def start(*, by: str = "manual") -> bool:
    """Start the daemon unless one runs; True if this call started it. ``by`` (manual or
    session) is recorded: only a daemon that a test session started is stopped by sessions."""
    _need_root()
    RUN.mkdir(parents=True, exist_ok=True, mode=0o711)
    with locked(RUN / ".lock"):
        if running():
            return False
        for tool in ("dockerd", "containerd", "runc"):
            if shutil.which(tool) is None:
                raise DaemonError(f"{tool} is missing: apt-get install docker.io (scripts/setup.sh does, as root)")
        data, driver = _data_root()
        config = RUN / "daemon.json"
        config.write_text("{}\n")  # never a user's /etc/docker/daemon.json
        SOCKET.unlink(missing_ok=True)
        argv = [
            "dockerd", "--config-file", str(config), "--host", HOST, "--data-root", str(data),
            "--exec-root", str(RUN / "exec"), "--pidfile", str(RUN / "dockerd.pid"),
            "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-forward=false",
            "--ip-masq=false", "--userland-proxy=false", "--storage-driver", driver,
            "--exec-opt", "native.cgroupdriver=cgroupfs", "--log-level", "warn",
        ]  # fmt: skip
        env = {
            **{k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")},
            "HTTP_PROXY": NO_REGISTRY, "HTTPS_PROXY": NO_REGISTRY, "NO_PROXY": "",
        }  # fmt: skip
        with open(RUN / "dockerd.log", "ab") as log:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while not running():
            if proc.poll() is not None or time.monotonic() > deadline:
                if proc.poll() is None:
                    proc.kill()
                raise DaemonError(f"dockerd did not come up (exit {proc.poll()}); {RUN / 'dockerd.log'} ends:\n{_tail(RUN / 'dockerd.log')}")
            time.sleep(0.1)
        (RUN / "started-by").write_text(by)
        return True


def stop() -> bool:
    """Stop the daemon this module started (SIGTERM, then SIGKILL) and unmount its data root;
    True if one was running."""
    _need_root()
    with locked(RUN / ".lock"):
        pid = _pid()
        was = pid is not None
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                while _alive(pid):
                    time.sleep(0.05)
        data = STATE / "data"
        if os.path.ismount(data):
            subprocess.run(["umount", str(data)], check=False, capture_output=True)
        for name in ("dockerd.pid", "started-by"):
            (RUN / name).unlink(missing_ok=True)
        SOCKET.unlink(missing_ok=True)
        return was


@contextlib.contextmanager
def session() -> Iterator[str]:
    """The daemon's address for as long as the block runs: started if none answers, stopped
    afterwards when no other session still uses it and a session (not ``start``) started it."""
    RUN.mkdir(parents=True, exist_ok=True, mode=0o711)
    users = os.open(RUN / ".users", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(users, fcntl.LOCK_SH)
        if not running():
            start(by="session")
        yield HOST
    finally:
        fcntl.flock(users, fcntl.LOCK_UN)
        try:
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # another session still runs
        else:
            if _started_by() == "session":
                stop()
        finally:
            os.close(users)


def status() -> dict[str, object]:
    data = STATE / "data"
    return {
        "host": HOST,
        "running": running(),
        "pid": _pid(),
        "started_by": _started_by(),
        "data_root": str(data),
        "btrfs": os.path.ismount(data),
        "quotas": quota_mode(data) if os.path.ismount(data) else "",
        "log": str(RUN / "dockerd.log"),
    }


def _data_root() -> tuple[Path, str]:
    """(data root, storage driver): btrfs on a loop-mounted image when possible."""
    STATE.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = STATE / "data"
    data.mkdir(exist_ok=True)
    image = STATE / "btrfs.img"
    if os.path.ismount(data) or (shutil.which("mkfs.btrfs") and shutil.which("btrfs")):
        try:
            if not os.path.ismount(data):
                if not image.exists():
                    with open(image, "wb") as f:
                        f.truncate(DISK_GB << 30)  # sparse
                    _run(["mkfs.btrfs", "-q", str(image)])
                _run(["mount", "-o", "loop", str(image), str(data)])
            _enable_quotas(data)
            return data, "btrfs"
        except DaemonError as exc:
            print(f"legorl-docker: no btrfs data root ({exc}); overlay2 without disk caps", file=sys.stderr)
    plain = STATE / "overlay2"
    plain.mkdir(exist_ok=True)
    return plain, "overlay2"


def _enable_quotas(data: Path) -> None:
    """Quotas on the btrfs data root (what ``--storage-opt size`` caps with): simple quotas where
    the kernel has them (Linux 6.7+), else full qgroups. Full qgroup accounting makes the kernel's
    btrfs-cleaner spend seconds of a core on every deleted container layer (measured here: a core
    busy for minutes after a few dozen trials, ``docker build`` of one COPY 29 s instead of 2 s)."""
    mode = quota_mode(data)
    if not SIMPLE_QUOTA.exists():
        if mode == "":
            _run(["btrfs", "quota", "enable", str(data)])
        return
    if mode == "squota":
        return
    if mode:
        _run(["btrfs", "quota", "disable", str(data)])
    fd = os.open(data, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, BTRFS_IOC_QUOTA_CTL, bytearray(struct.pack("QQ", QUOTA_CTL_ENABLE_SIMPLE, 0)))
    except OSError as exc:
        raise DaemonError(f"enabling btrfs simple quotas on {data}: {exc}") from exc
    finally:
        os.close(fd)


def quota_mode(data: Path) -> str:
    """The btrfs quota mode of the file system at ``data``: squota, qgroup, or '' (none)."""
    done = subprocess.run(["findmnt", "-no", "UUID", "--target", str(data)], capture_output=True, text=True, check=False)
    mode = Path("/sys/fs/btrfs") / done.stdout.strip() / "qgroups" / "mode"
    return mode.read_text().strip() if done.stdout.strip() and mode.is_file() else ""


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise DaemonError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")


def _pid() -> int | None:
    try:
        pid = int((RUN / "dockerd.pid").read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # a daemon this process started: reap it
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _started_by() -> str:
    try:
        return (RUN / "started-by").read_text().strip()
    except OSError:
        return ""


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (created if missing) for the block."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _need_root() -> None:
    if os.geteuid() != 0:
        raise DaemonError("lego-rl's Docker daemon runs as root (sudo scripts/dockerd.sh start)")


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="legorl-dockerd", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["start", "stop", "status", "host"])
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            print(f"started {HOST}" if start() else f"already running: {HOST}")
        elif args.command == "stop":
            print("stopped" if stop() else "not running")
        elif args.command == "status":
            print(json.dumps(status(), indent=2))
            return 0 if running() else 3
        else:
            print(HOST)
    except DaemonError as exc:
        print(f"legorl-dockerd: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
