"""Let a loopback-only sandbox reach exactly one host server (the proxy).

- :class:`NetnsRelay` (the local sandbox): the trial gets its own network namespace with only
  ``lo``; our process listens *inside* it on ``127.0.0.1:PORT`` and relays each connection to
  the host server. Every agent-phase command joins that namespace (``nsenter --net``), so it
  reaches the proxy at the usual address and nothing else; nothing of ours runs inside.
- :class:`SocketRelay` (containers with no network at all): a unix socket per trial, bind-mounted
  into the container, whose every connection is relayed to the host server; the container's
  init (:data:`CONTAINER_INIT`, run on the image's python3) listens on its own loopback and
  connects to that socket.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

CONTAINER_INIT = Path(__file__).with_name("container_init.py")
"""PID 1 of a trial's container: reaps orphans, relays its loopback port to the trial's socket."""


def relay(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes; closes both."""

    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    other = threading.Thread(target=pump, args=(b, a), daemon=True)
    other.start()
    pump(a, b)
    other.join()
    a.close()
    b.close()


def serve(listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Accept until the listener is closed; relay each client to ``connect()``."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        try:
            upstream = connect()
        except OSError:
            client.close()
            continue
        threading.Thread(target=relay, args=(client, upstream), daemon=True).start()


class _Made(TypedDict, total=False):
    """What the relay's namespace thread made: the namespace and its listener, or the error."""

    fd: int
    listener: socket.socket
    error: OSError


class NetnsRelay:
    """A loopback-only network namespace whose ``127.0.0.1:port`` is relayed to ``(host, port)``.

    A short-lived thread unshares its network namespace, brings ``lo`` up, binds the
    listening socket there and ends; the socket (served from the host namespace) and an fd
    on the namespace (:attr:`ns_fd`, for ``nsenter --net``) keep it alive until ``close()``.
    """

    def __init__(self, port: int, host: str, host_port: int):
        self.address = (host, host_port)
        made: _Made = {}
        thread = threading.Thread(target=self._enter, args=(port, made), name="netns-relay")
        thread.start()
        thread.join()
        if "error" in made:
            raise OSError(f"cannot make a network namespace for the relay: {made['error']}")
        self.ns_fd: int = made["fd"]
        self._listener: socket.socket = made["listener"]
        threading.Thread(target=serve, args=(self._listener, self._connect), daemon=True).start()

    @staticmethod
    def _enter(port: int, made: _Made) -> None:
        try:
            os.unshare(os.CLONE_NEWNET)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                flags = 0x1 | 0x8 | 0x40  # IFF_UP | IFF_LOOPBACK | IFF_RUNNING
                fcntl.ioctl(probe, 0x8914, struct.pack("16sH14x", b"lo", flags))  # SIOCSIFFLAGS
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", port))
            listener.listen(64)
            made["listener"] = listener
            made["fd"] = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
        except OSError as exc:
            made["error"] = exc

    def _connect(self) -> socket.socket:
        return socket.create_connection(self.address, timeout=30)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with contextlib.suppress(OSError):
            os.close(self.ns_fd)


def unix_request(path: Path, request: bytes, *, timeout: float) -> bytes:
    """Send ``request`` to the unix socket ``path`` (any path length) and read the answer to EOF."""
    directory = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(timeout)
            client.connect(f"/proc/self/fd/{directory}/{path.name}")
            client.sendall(request)
            chunks = []
            while chunk := client.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks)
    finally:
        os.close(directory)


class SocketRelay:
    """Listens on the unix socket ``path`` (mode 0600, at any path length: bound through a
    descriptor of its directory); each connection goes to ``upstream()`` (refused while that is
    None)."""

    def __init__(self, path: Path, upstream: Callable[[], tuple[str, int] | None]):
        self.path = path
        self.upstream = upstream
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        directory = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
        try:
            self._listener.bind(f"/proc/self/fd/{directory}/{path.name}")
        finally:
            os.close(directory)
        os.chmod(path, 0o600)
        self._listener.listen(64)
        threading.Thread(target=serve, args=(self._listener, self._connect), daemon=True, name="socket-relay").start()

    def _connect(self) -> socket.socket:
        address = self.upstream()
        if address is None:
            raise OSError("no proxy to relay to yet")
        upstream = socket.create_connection(address, timeout=30)
        upstream.settimeout(None)  # a generation may be silent for minutes
        return upstream

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self.path.unlink(missing_ok=True)
