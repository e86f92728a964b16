"""Launch ``vllm serve`` for the policy, wait until it is healthy, stop it on close.

The server runs in its own process group (vLLM forks engine and worker processes), so
:meth:`LaunchedServer.stop` ends all of them; an ``atexit`` hook does the same if the run
dies without closing the backend.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from lego_rl.kinds import Problem
from legorl_vllm.client import VLLMError
from legorl_vllm.options import VLLMOptions

STOP_GRACE_S = 30.0
POLL_S = 1.0

LOCK = "gpu/requirements-vllm.txt"
"""vLLM's own environment in the lego-rl repository: vLLM 0.33 pins torch 2.14 and transformers
>= 5.16.1, past the < 5.11 of legorl-embedded and verl, so it cannot share lego-rl's."""
VLLM_VERSION = "0.33.0"
"""The vLLM that lock pins (tests/test_gpu_locks.py keeps them equal)."""
INSTALL = f"python3.12 -m venv .venv-vllm && .venv-vllm/bin/pip install -r {LOCK}"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class LaunchPlan:
    """What to serve and how: everything `vllm serve` needs besides the options."""

    model: str
    """Model directory or hub id passed to `vllm serve`."""
    served_name: str
    max_model_len: int
    dtype: str
    seed: int
    dev_mode: bool
    """Enable vLLM's dev endpoints (/pause, /resume, /collective_rpc) for weight reloads."""
    tokenizer: str | None = None
    extra_env: dict[str, str] = field(default_factory=dict)


def serve_command(options: VLLMOptions, plan: LaunchPlan, port: int) -> list[str]:
    """The `vllm serve` command line of ``plan`` (log-probs of the distribution actually
    sampled from, routed experts when routing replay is on)."""
    cmd = [
        options.executable,
        "serve",
        plan.model,
        "--host",
        options.host,
        "--port",
        str(port),
        "--served-model-name",
        plan.served_name,
        "--tensor-parallel-size",
        str(options.tensor_parallel_size),
        "--gpu-memory-utilization",
        str(options.gpu_memory_utilization),
        "--max-model-len",
        str(plan.max_model_len),
        "--dtype",
        plan.dtype,
        "--seed",
        str(plan.seed),
        "--logprobs-mode",
        "processed_logprobs",
    ]
    if plan.tokenizer:
        cmd += ["--tokenizer", plan.tokenizer]
    if options.enable_routing_replay:
        cmd.append("--enable-return-routed-experts")
    if options.api_key:
        cmd += ["--api-key", options.api_key]
    return cmd + list(options.extra_args)


class LaunchedServer:
    """One `vllm serve` process group started by this backend."""

    def __init__(self, options: VLLMOptions, plan: LaunchPlan, log_path: Path) -> None:
        self.options, self.plan, self.log_path = options, plan, log_path
        self.port = options.port or free_port(options.host)
        self.url = f"http://{options.host}:{self.port}"
        self.command = serve_command(options, plan, self.port)
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the process and block until ``/health`` answers (or fail with its log tail)."""
        if shutil.which(self.options.executable) is None:
            raise VLLMError(str(missing_executable(self.options.executable)))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.plan.extra_env, **self.options.env}
        if self.plan.dev_mode:
            env["VLLM_SERVER_DEV_MODE"] = "1"
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        atexit.register(self.stop)
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.options.startup_timeout_s
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise VLLMError(
                    f"`vllm serve` exited with code {self._proc.returncode} before it was healthy; "
                    f"last lines of {self.log_path}:\n{self.log_tail()}"
                )
            try:
                if httpx.get(f"{self.url}/health", timeout=5.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(POLL_S)
        self.stop()
        raise VLLMError(
            f"`vllm serve` was not healthy within {self.options.startup_timeout_s:.0f}s "
            f"(inference.options.startup_timeout_s); last lines of {self.log_path}:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(
                self.log_path.read_text(errors="replace").splitlines()[-lines:]
            )
        except OSError:
            return "(no log)"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after a grace period. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        atexit.unregister(self.stop)
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=STOP_GRACE_S)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def missing_executable(executable: str) -> Problem:
    return Problem(
        f"inference 'vllm' must launch `{executable} serve`, but `{executable}` is not on PATH",
        fix=f"vLLM {VLLM_VERSION} gets its own environment ({LOCK}; its pins cannot sit beside "
        f"lego-rl's): on the GPU machine, from the lego-rl checkout, `{INSTALL}`, then set "
        "inference.options.executable to the absolute path of .venv-vllm/bin/vllm; or set "
        "inference.options.url to a running server",
    )
