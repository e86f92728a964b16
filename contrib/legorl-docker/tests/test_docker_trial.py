"""Real trials in containers: lego_rl's TrialRunner with the docker sandbox, the test-script
verifier and the anti-cheat policies on the kit's fix-add task. The oracle earns 1, doing
nothing 0, an agent that asks the real proxy (through the trial's unix socket, the container
having no network) for its command earns 1 with that call recorded; afterwards no container,
committed image, socket or state dir of the trial is left."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from legorl_docker.plugin import DockerBackend
from legorl_std.dialects.openai_chat import OpenAIChatDialect
from legorl_std.harness.scripted import ScriptedHarness

from lego_rl.data import Attribution, Sampling, Termination, TrialResult
from lego_rl.engine.trial import TrialRunner, TrialSetup
from lego_rl.kinds import Endpoint, HarnessResult, Sandbox, Task
from lego_rl.proxy.server import ProxyServer
from lego_rl.registry import default_registry
from lego_rl.testing.contracts.base import ContractEnv
from lego_rl.testing.scripted_inference import ScriptedInference
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

ANTICHEAT = ("git-history", "no-network", "test-guard", "reward-guard", "process-reaper")
FIX = "sed -i 's/a - b/a + b/' calc.py"
ASK = r"""
import json, os, urllib.request
body = json.dumps({"model": "policy", "messages": [{"role": "user", "content": "fix calc.py"}]}).encode()
request = urllib.request.Request(os.environ["BASE"] + "/v1/chat/completions", body,
                                 {"Authorization": "Bearer " + os.environ["KEY"], "Content-Type": "application/json"})
with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=60) as reply:
    print(json.load(reply)["choices"][0]["message"]["content"])
"""


class Capturing:
    """The docker backend, keeping the sandboxes it started (to look at after the trial)."""

    def __init__(self, backend: DockerBackend):
        self.backend = backend
        self.started: list[Any] = []

    def preflight(self) -> list[Any]:
        return self.backend.preflight()

    def start(self, task: Task, trial_id: str) -> Sandbox:
        sandbox = self.backend.start(task, trial_id)
        self.started.append(sandbox)
        return sandbox


class AskingAgent:
    """Asks the proxy (from inside the container) for one command, then runs it."""

    dialect = "openai-chat"

    def preflight(self) -> list[Any]:
        return []

    def run(self, sandbox: Sandbox, task: Task, endpoint: Endpoint, timeout: float) -> HarnessResult:
        asked = sandbox.exec(
            f"python3 - <<'LEGORL_ASK'\n{ASK}\nLEGORL_ASK", timeout=timeout,
            env={"BASE": endpoint.base_url, "KEY": endpoint.api_key},
        )  # fmt: skip
        if asked.exit_code != 0:
            return HarnessResult(Termination.HARNESS_CRASH, asked.exit_code, reason=asked.stderr[-2000:])
        ran = sandbox.exec(asked.stdout.strip(), timeout=timeout)
        return HarnessResult(Termination.COMPLETED, ran.exit_code, transcript=asked.stdout + ran.stdout)


@pytest.fixture
def env(tmp_path: Path) -> ContractEnv:
    return ContractEnv(tmp_path, default_registry())


def trial(env: ContractEnv, harness: Any, trial_id: str, replies: list[str] | None = None) -> tuple[TrialResult, Capturing, ProxyServer]:
    registry = env.registry
    ctx = env.build_context()
    backend = Capturing(registry.build("sandbox", "docker", None, ctx))
    proxy = ProxyServer(ScriptedInference(tiny_chat_tokenizer(), list(replies or [])), {"openai-chat": OpenAIChatDialect()}, model_name="policy")
    setup = TrialSetup(
        sandbox=backend,
        harness=harness,
        verifier=registry.build("verifier", "test-script", None, ctx),
        proxy=proxy,
        dialect="openai-chat",
        model_name="policy",
        sampling=Sampling(max_tokens=64),
        anticheat=[registry.build("anticheat", name, None, ctx) for name in ANTICHEAT],
    )
    proxy.start()
    try:
        return TrialRunner(setup).run(env.task("fix-add"), trial_id), backend, proxy
    finally:
        proxy.stop()


def nothing_left(backend: Capturing, trial_id: str) -> None:
    docker = backend.backend.docker
    for kind in ("ps", "images"):
        args = ["ps", "-a"] if kind == "ps" else ["images"]
        listed = docker.text(*args, "--filter", f"label=legorl.trial={trial_id}", "--format", "{{.ID}}")
        assert listed == "", f"{kind}: the trial left {listed.split()}"
    for sandbox in backend.started:
        assert not sandbox._state.exists(), f"the trial's state dir (its socket) {sandbox._state} is left"


def test_oracle_earns_1_in_a_fresh_container_from_the_sealed_state(env: ContractEnv) -> None:
    solve = env.task("fix-add").path / "solution" / "solve.sh"
    harness = ScriptedHarness(["bash /tmp/solve.sh", "echo built > calc.o"], uploads={str(solve): "/tmp/solve.sh"})
    result, backend, _ = trial(env, harness, "docker-oracle")
    assert (result.termination, result.reward, result.attribution) == (Termination.COMPLETED, 1.0, Attribution.NONE), result.reason
    print({t.phase: round(t.seconds, 2) for t in result.timings}, backend.started[0].timings)
    crossing = result.verifier["crossing"]
    assert crossing["crossed_paths"] == ["M /app/calc.py"]
    assert "A /app/calc.o: not a source file (by extension)" in crossing["dropped_paths"], crossing
    assert result.verifier["pristine"] is True and result.verifier["result_stream"] == "descriptor"
    diff = Path(result.verifier["agent_diff"]).read_text()  # the agent's change, as reward-hacking reads it
    assert "--- a/app/calc.py\n+++ b/app/calc.py\n" in diff and "+    return a + b\n" in diff and "-    return a - b\n" in diff, diff
    assert "Binary file /app/calc.o added" not in diff and "/app/calc.o" in diff, diff
    nothing_left(backend, "docker-oracle")
    record = json.loads((env.build_context().run_dir / "trials" / "docker-oracle" / "sandbox.json").read_text())
    assert record["network"] == "none" and record["from_replaced"] == {"python:3.12-slim": "legorl/base:bookworm"}


def test_doing_nothing_earns_0(env: ContractEnv) -> None:
    result, backend, _ = trial(env, ScriptedHarness([]), "docker-noop")
    assert (result.termination, result.reward) == (Termination.COMPLETED, 0.0), result.reason
    assert result.verifier["crossing"]["crossed"] == 0
    nothing_left(backend, "docker-noop")


def test_an_agent_reaches_the_proxy_only_through_its_socket(env: ContractEnv) -> None:
    result, backend, proxy = trial(env, AskingAgent(), "docker-asks", replies=[FIX])
    assert (result.termination, result.reward) == (Termination.COMPLETED, 1.0), (result.reason, result.harness)
    assert result.calls == 1 and result.trajectory is not None and result.trajectory.trained_tokens > 0
    nothing_left(backend, "docker-asks")


def test_a_daemon_that_is_down_is_a_preflight_problem_naming_how_to_start_it(env: ContractEnv, tmp_path: Path) -> None:
    backend = env.registry.build("sandbox", "docker", {"host": f"unix://{tmp_path}/no-daemon.sock"}, env.build_context())
    fatal = [p for p in backend.preflight() if p.fatal]
    assert len(fatal) == 1 and "cannot reach a Docker daemon" in fatal[0].message
    assert "scripts/dockerd.sh start" in fatal[0].fix


def test_an_image_that_fails_to_build_ends_sandbox_error_with_the_build_log(env: ContractEnv, tmp_path: Path) -> None:
    task_dir = tmp_path / "broken"
    subprocess.run(["cp", "-r", str(env.task("fix-add").path), str(task_dir)], check=True)
    (task_dir / "environment" / "Dockerfile").write_text(
        "FROM python:3.12-slim\nWORKDIR /app\nCOPY app/ /app/\n"
        "RUN python3 -c \"import urllib.request; urllib.request.urlopen('http://pypi.org', timeout=5)\"\n"
    )
    task = env.task("fix-add").model_copy(update={"name": "broken", "path": task_dir})
    backend = env.registry.build("sandbox", "docker", None, env.build_context())
    proxy = ProxyServer(ScriptedInference(tiny_chat_tokenizer(), []), {"openai-chat": OpenAIChatDialect()}, model_name="policy")
    setup = TrialSetup(
        sandbox=backend, harness=ScriptedHarness([]), verifier=env.registry.build("verifier", "test-script", None, env.build_context()),
        proxy=proxy, dialect="openai-chat", model_name="policy", sampling=Sampling(),
    )  # fmt: skip
    result = TrialRunner(setup).run(task, "docker-broken")
    assert result.termination == Termination.SANDBOX_ERROR and result.attribution == Attribution.INFRASTRUCTURE
    assert "building the image of task broken" in result.reason and "offline: no network in the build" in result.reason
    assert "urlopen" in result.reason and "returned a non-zero code" in result.reason, result.reason
