"""PID 1 of a trial's container (the docker sandbox's, the harbor sandbox's on docker or
podman): reaps orphans, and (agent phase) relays the proxy.

``python3 -I -S /run/legorl/init.py PORT``: with PORT > 0 it listens on 127.0.0.1:PORT (the
container's own loopback; it has no other network) and relays every connection to the unix
socket /run/legorl/proxy.sock, whose host end
(:class:`legorl_std.sandbox.netforward.SocketRelay`) relays to the proxy. Runs as root (the
docker sandbox's commands run as another user, so they can neither signal it nor open the
socket dir). The standard library only, any Python 3: it runs on the task image's interpreter.
"""

import os
import signal
import socket
import sys
import threading

SOCKET = "/run/legorl/proxy.sock"


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


def main():
    signal.signal(signal.SIGCHLD, reap)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: os._exit(0))
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if port:
        threading.Thread(target=serve, args=(port,), daemon=True).start()
    print("legorl-init ready", flush=True)
    while True:
        signal.pause()
        reap()


if __name__ == "__main__":
    main()
