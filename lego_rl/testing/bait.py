"""Host-side bait for the red team's network attacks: servers that hand out the fix to whoever
asks (the sandbox contracts' and ``legorl redteam``'s)."""

from __future__ import annotations

import contextlib
import http.server
import socket
import socketserver
import threading


class Bait:
    """An HTTP server (all addresses) serving each fixed module at ``/<name>`` and a UDP
    server answering a datagram that names one with its text (``fix`` or anything else: the
    first)."""

    def __init__(self, files: dict[str, str]) -> None:
        served = {name: text.encode() for name, text in files.items()}
        first = next(iter(served.values()))

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = served.get(self.path.lstrip("/"), first)
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        class Udp(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                asked = self.request[0].decode(errors="replace").strip()
                self.request[1].sendto(served.get(asked, first), self.client_address)

        self.http = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Handler)
        self.udp = socketserver.ThreadingUDPServer(("0.0.0.0", 0), Udp)
        for server in (self.http, self.udp):
            threading.Thread(target=server.serve_forever, daemon=True).start()
        self.host_ip = host_address()

    @property
    def placeholders(self) -> dict[str, str]:
        port = self.http.server_address[1]
        return {
            "bait": f"http://127.0.0.1:{port}",
            "bait_ip": f"http://{self.host_ip}:{port}",
            "udp": f"{self.host_ip} {self.udp.server_address[1]}",
        }

    def close(self) -> None:
        for server in (self.http, self.udp):
            server.shutdown()
            server.server_close()


def host_address() -> str:
    """This host's outward address (no packet is sent), else loopback."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))
        return str(s.getsockname()[0])
    return "127.0.0.1"
