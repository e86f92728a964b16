"""Test doubles and scaffolding the harness plugin tests share: a scripted model server on
127.0.0.1, a registry holding one plugin, one real trial in the local bubblewrap sandbox.

Imported by tests/test_harness_*.py (pytest puts tests/ on sys.path for them).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from legorl_std.sandbox.local import LocalSandboxBackend, LocalSandboxOptions
from legorl_std.tasks.harbor_dir import load_task

from lego_rl.data import Termination
from lego_rl.engine.trial import provide_harness_files
from lego_rl.kinds import Endpoint, ExecResult, Harness, HarnessResult
from lego_rl.registry import BuildContext, Registry
from lego_rl.spec.models import Spec
from lego_rl.testing.contracts import conformance_tasks_dir

Answer = Callable[[int, dict[str, Any]], tuple[int, Any]]
"""Request number (from 1) and JSON body -> status and a JSON payload, or a list of SSE events."""
Turn = dict[str, Any]
"""A scripted reply of a streaming test: the turn's content, or {"status": int, "error": message}."""

needs_sandbox = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


def end_to_end(*marks: pytest.MarkDecorator) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Marks an end-to-end test: slow, needs the sandbox, and ``marks`` (e.g. the CLI installed)."""

    def mark(test: Callable[..., None]) -> Callable[..., None]:
        for each in (pytest.mark.slow, needs_sandbox, *marks):
            test = each(test)
        return test

    return mark


def plugin_registry(plugin: ModuleType, name: str, distribution: str) -> Iterator[Registry]:
    """A registry holding one plugin module while a test runs (body of a fixture)."""
    reg = Registry()
    reg.add_module(plugin, name=name, distribution=distribution)
    yield reg
    reg.remove_module(plugin)


def spec_with(run: dict[str, Any]) -> Spec:
    """A minimal spec with these ``run`` settings (every block a placeholder plugin)."""
    blocks = {k: {"plugin": "x"} for k in ("tasks", "sandbox", "harness", "dialect", "verifier",
                                          "optimizer", "inference", "trainer")}  # fmt: skip
    return Spec.model_validate({"model": {"name": "m"}, "run": run, **blocks})


class FakeServer:
    """A model API server on 127.0.0.1 that answers as a test scripts; records every request."""

    def __init__(self, answer: Answer):
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({
                    "path": self.path, "key": self.headers.get("x-api-key"),
                    "auth": self.headers.get("Authorization"), "body": body, "at": time.monotonic(),
                })  # fmt: skip
                status, payload = answer(len(outer.requests), body)
                if isinstance(payload, list):
                    self.send_response(status)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for event in payload:
                        self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                    return
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/s/trial-1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def streamed(
    reply: Callable[[int, dict[str, Any]], Turn],
    events: Callable[[int, dict[str, Any], Turn], list[dict[str, Any]]],
    error: Callable[[str], dict[str, Any]],
) -> Answer:
    """An answer that streams ``events`` of each scripted turn, or an ``error`` body for a turn
    with a status."""

    def answer(n: int, body: dict[str, Any]) -> tuple[int, Any]:
        turn = reply(n, body)
        if "status" in turn:
            return turn["status"], error(turn["error"])
        return 200, events(n, body, turn)

    return answer


def run_trial(tmp_path: Path, harness: Harness, answer: Answer, **endpoint: Any) -> tuple[HarnessResult, FakeServer, str]:
    """Run the real harness in the real local sandbox on the conformance task fix-add against a
    FakeServer; return its result, the server and calc.py afterwards."""
    server = FakeServer(answer)
    task = load_task(conformance_tasks_dir() / "fix-add")
    sandbox = LocalSandboxBackend(LocalSandboxOptions(root=str(tmp_path / "trials")), BuildContext()).start(task, "t1")
    url = sandbox.endpoint_url(server.url)
    provide_harness_files(sandbox, harness)
    try:
        result = harness.run(sandbox, task, Endpoint(base_url=url, api_key="sk-session", model="policy", **endpoint), timeout=120)
        calc = sandbox.host_path("/app/calc.py").read_text()
    finally:
        sandbox.stop()
        server.close()
    return result, server, calc


FIX = "sed -i 's/a - b/a + b/' calc.py"
"""The shell command that solves fix-add."""


def assert_fixed(result: HarnessResult, server: FakeServer, calc: str, path: str) -> dict[str, Any]:
    """The run completed with calc.py fixed in two model calls, the first to ``path`` for the
    session's model; returns that first request."""
    assert result.termination == Termination.COMPLETED, result.reason
    assert calc == "def add(a, b):\n    return a + b\n"
    assert len(server.requests) == 2
    first = server.requests[0]
    assert first["path"] == path
    assert first["body"]["model"] == "policy"
    return first


def assert_failed_fast(result: HarnessResult, server: FakeServer) -> None:
    """A model API error ended the run as API_ERROR after one call, without retries (a harness
    that waited instead would end as a timeout: how long it took is not checked)."""
    assert result.termination == Termination.API_ERROR, result.reason
    assert len(server.requests) == 1, "no retries: a broken proxy must fail the trial at once"


class NullSandbox:
    """A sandbox in which every command succeeds and nothing happens (tests of the loop itself)."""

    workdir = "/app"

    def __init__(self) -> None:
        self.stopped = False

    def exec(self, command: str, *, timeout: float, env: dict[str, str] | None = None, cwd: str | None = None) -> ExecResult:
        return ExecResult(0)

    def upload(self, src: Any, dst: str) -> None:
        pass

    def download(self, src: str, dst: Any) -> None:
        pass

    def endpoint_url(self, host_url: str) -> str:
        return host_url

    def stop(self) -> None:
        self.stopped = True


class NullSandboxes:
    """The backend of :class:`NullSandbox`; ``started`` lists every sandbox it handed out."""

    def __init__(self) -> None:
        self.started: list[NullSandbox] = []

    def preflight(self) -> list[Any]:
        return []

    def start(self, task: Any, trial_id: str) -> NullSandbox:
        self.started.append(NullSandbox())
        return self.started[-1]
