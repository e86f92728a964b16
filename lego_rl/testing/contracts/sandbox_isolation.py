"""Sandbox isolation contract: what a command inside must not reach (hidden host files, host
processes, another sandbox's files, any network but the proxy endpoint) and must not change
(the host's files). The host files a sandbox must hide: the run directory (other trials live
there), the task's tests and solution, the enclosing project's git history.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import secrets
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lego_rl.kinds import Sandbox
from lego_rl.testing.contracts.base import ContractEnv, ContractError, contract, expect
from lego_rl.testing.contracts.sandbox import brief, started

PUBLIC_ADDRESS = ("1.1.1.1", 443)
"""A public address that answers wherever there is a route to the internet (tried only when
no host port answered: one leak is enough, and a test of a leaky double stays offline)."""
ENDPOINT_BODY = "legorl-endpoint-ok"
PROBE = r"""
import hashlib, json, os, socket, urllib.request
p = json.loads(bytes.fromhex("%s").decode())
def digest(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None
out = {"readable": [path for path, want in p["hidden"].items() if digest(path) == want],
       "connected": [], "peers": [], "endpoint": None}
for path in p["writes"]:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("escaped")
    except OSError:
        pass
for host, port in p["closed"]:
    with socket.socket() as s:
        s.settimeout(2)
        try:
            s.connect((host, port))
        except OSError:
            continue
    out["connected"].append(f"{host}:{port}")
    break
if p["peer"]:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if p["peer"].encode() in f.read():
                    out["peers"].append(int(pid))
        except OSError:
            pass
if p["endpoint"]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(p["endpoint"], timeout=5) as r:
            out["endpoint"] = r.read().decode()
    except Exception as exc:
        out["endpoint"] = f"error: {exc!r}"
print(json.dumps(out))
"""


@contextlib.contextmanager
def serving(body: str) -> Iterator[str]:
    """An HTTP server on the host's 127.0.0.1 answering every GET with ``body``: its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/s/contract"
    finally:
        server.shutdown()
        server.server_close()


def probe(sandbox: Sandbox, **params: Any) -> dict[str, Any]:
    """Run :data:`PROBE` inside (python3 of the kit task's image) with ``params``."""
    spec = {"hidden": {}, "writes": [], "closed": [], "peer": "", "endpoint": "", **params}
    command = f"python3 - <<'LEGORL_PROBE'\n{PROBE % json.dumps(spec).encode().hex()}\nLEGORL_PROBE"
    out = sandbox.exec(command, timeout=60)
    lines = out.stdout.strip().splitlines()
    try:
        return dict(json.loads(lines[-1]))
    except (IndexError, ValueError):
        raise ContractError(
            f"the isolation probe (python3 inside the sandbox) failed: {brief(out)}"
        ) from None


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _hidden_files(env: ContractEnv, marker: Path) -> dict[Path, str]:
    """Host files no sandbox may read, with what they are."""
    task = env.task()
    hidden = {
        marker: "a file in the run directory",
        task.path / "solution" / "solve.sh": "the task's solution",
        task.path / "tests" / "test.sh": "the task's tests",
    }
    for parent in task.path.parents:
        if (parent / ".git" / "HEAD").is_file():
            hidden[parent / ".git" / "HEAD"] = "the enclosing project's git history"
            break
    return hidden


@contract("sandbox", "isolation")
def isolation(backend: Any, env: ContractEnv) -> None:
    """no host files, host processes, other sandboxes or network but the proxy endpoint from inside"""
    run_dir = env.build_context().run_dir or env.tmp
    run_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(8)
    marker = run_dir / f"legorl-marker-{token}"
    marker.write_text(token)
    hidden = _hidden_files(env, marker)
    task_files = file_digests(env.task().path)
    escapes = [d / f"legorl-escape-{token}" for d in (run_dir, env.tmp, env.task().path)]
    peer = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", f"legorl-peer-{token}"], cwd=run_dir
    )
    try:
        with (
            serving(ENDPOINT_BODY) as host_url,
            socket.create_server(("127.0.0.1", 0)) as closed,
            started(backend, env, "contract-isolation-a") as first,
            started(backend, env, "contract-isolation-b") as second,
        ):
            url = first.endpoint_url(host_url)
            secret = f"legorl-secret-{token}"
            inside = [f"{first.workdir}/{secret}", f"/tmp/{secret}", f"$HOME/{secret}"]
            found = probe(
                first,
                hidden={str(p): digest(p) for p in hidden},
                writes=[str(p) for p in escapes],
                closed=[["127.0.0.1", closed.getsockname()[1]], list(PUBLIC_ADDRESS)],
                peer=f"legorl-peer-{token}",
                endpoint=url,
            )
            _judge(found, hidden, url, host_url)
            quoted = " ".join(f'"{p}"' for p in inside)  # $HOME expands inside
            wrote = first.exec(
                f'for p in {quoted}; do echo {secret} 2>/dev/null > "$p"; done; cat "{inside[0]}"', timeout=30
            )
            expect(secret in wrote.stdout, f"a command could not write in its workdir: {brief(wrote)}")
            seen = second.exec(f'for p in {quoted}; do cat "$p" 2>/dev/null; done; true', timeout=30)
            expect(
                secret not in seen.stdout,
                "a file one sandbox wrote (in its workdir, /tmp or $HOME) is readable in another "
                "sandbox of the same task: give every sandbox its own files",
            )
        leaked = [str(p) for p in escapes if p.exists()]
        expect(
            not leaked,
            f"a command inside created {', '.join(leaked)} on the host: the host's files must be "
            "invisible or read-only inside; results leave a sandbox only through download()",
        )
        expect(
            file_digests(env.task().path) == task_files,
            f"the task's files on the host ({env.task().path}) changed while sandboxes ran: a "
            "sandbox must work on its own copy of them",
        )
    finally:
        peer.kill()
        peer.wait()
        for path in escapes:
            path.unlink(missing_ok=True)


def _judge(found: dict[str, Any], hidden: dict[Path, str], url: str, host_url: str) -> None:
    readable = [f"{hidden[Path(path)]} ({path})" for path in found["readable"]]
    expect(
        not readable,
        f"{'; '.join(readable)}: readable inside the sandbox at the host path; hide such paths "
        "(the local sandbox mounts an empty tmpfs over them)",
    )
    expect(
        not found["peers"],
        f"a host process (pids {found['peers']}) is visible inside through /proc: run commands "
        "in their own PID namespace",
    )
    expect(
        found["endpoint"] == ENDPOINT_BODY,
        f"the proxy endpoint {url} (endpoint_url({host_url!r})) is not reachable from inside: "
        f"{found['endpoint']}",
    )
    expect(
        not found["connected"],
        f"a command inside connected to {', '.join(found['connected'])}, not the proxy endpoint: "
        "give the sandbox no network but the endpoint (e.g. a loopback-only network namespace "
        "with a relay to the proxy port)",
    )


def file_digests(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path) with its digest."""
    return {str(p.relative_to(root)): digest(p) for p in sorted(root.rglob("*")) if p.is_file()}
