"""PID 1 of a trial's container (the docker sandbox's, the harbor sandbox's on docker or
podman): reaps orphans, and (agent phase) relays the proxy.

``python3 -I -S /run/legorl/init.py PORT``: with PORT > 0 it listens on 127.0.0.1:PORT (the
container's own loopback; it has no other network) and relays every connection to the unix
socket /run/legorl/proxy.sock, whose host end
(:class:`legorl_std.sandbox.netforward.SocketRelay`) relays to the proxy. Runs as root (the
docker sandbox's commands run as another user, so they can neither signal it nor open the
socket dir). Where root may write that dir, it also serves /run/legorl/control.sock, on which
the host asks it to kill every other process (it needs no new process to do so) or for the
container's cgroup counters of limits hit (OOM kills, refused forks). The standard library
only, any Python 3: it runs on the task image's interpreter.
"""

import os
import signal
import socket
import sys
import threading

SOCKET = "/run/legorl/proxy.sock"
CONTROL = "/run/legorl/control.sock"


def reap(*_):
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def handle(client):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(SOCKET)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(port):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=handle, args=(client,), daemon=True).start()


def kill_others():
    """SIGKILL every process but this one, three rounds; how many there were at first. No fork:
    it works when the agent used up the container's processes."""
    first = None
    for _ in range(3):
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) != os.getpid()]
        if first is None:
            first = len(pids)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return first or 0


COUNTERS = (
    ("memory_mb", ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"), "oom_kill"),
    ("nproc", ("/sys/fs/cgroup/pids.events", "/sys/fs/cgroup/pids/pids.events"), "max"),
)
"""Limit name, the container's own cgroup file (v2, v1) and the counter in it."""


def counters():
    """``name count`` lines of the limits the container's cgroups counted (OOM kills, forks
    refused); a counter this kernel does not keep is left out."""
    lines = []
    for name, paths, field in COUNTERS:
        for path in paths:
            try:
                with open(path) as f:
                    for entry in f:
                        parts = entry.split()
                        if len(parts) == 2 and parts[0] == field:
                            lines.append(name + " " + parts[1])
                break
            except OSError:
                continue
    return "".join(line + "\n" for line in lines).encode() or b"\n"


def control():
    """Serve CONTROL where the dir lets root make it (the host's side only: the agent's user
    cannot open it): ``kill`` kills every other process and answers how many there were;
    ``counters`` answers :func:`counters`."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if os.path.exists(CONTROL):
            os.unlink(CONTROL)
        listener.bind(CONTROL)
        os.chmod(CONTROL, 0o600)
    except OSError:
        return
    listener.listen(4)
    while True:
        client, _ = listener.accept()
        try:
            asked = client.recv(16).strip()
            if asked == b"kill":
                client.sendall(b"%d\n" % kill_others())
            elif asked == b"counters":
                client.sendall(counters())
        except OSError:
            pass
        client.close()


def main():
    signal.signal(signal.SIGCHLD, reap)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: os._exit(0))
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if port:
        threading.Thread(target=serve, args=(port,), daemon=True).start()
    threading.Thread(target=control, daemon=True).start()
    print("legorl-init ready", flush=True)
    while True:
        signal.pause()
        reap()


if __name__ == "__main__":
    main()
