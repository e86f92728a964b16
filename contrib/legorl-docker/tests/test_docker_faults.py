"""Faults: a trial's container killed from outside (``docker kill`` through the daemon, as an
operator or the daemon's own trouble would) while the agent's command runs ends that trial
``sandbox_error`` (infrastructure), saying so, and the next trial on the same backend goes on;
afterwards the daemon holds no container or committed image of the run and no socket dir of it
is left."""

from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from legorl_docker.plugin import STATE_PREFIX, DockerBackend
from legorl_docker.sandbox import DockerSandbox
from legorl_std.dialects.openai_chat import OpenAIChatDialect
from legorl_std.harness.scripted import ScriptedHarness

from lego_rl.data import Attribution, Sampling, Termination, TrialResult
from lego_rl.engine.trial import TrialRunner, TrialSetup
from lego_rl.kinds import Endpoint, Harness, HarnessResult, Sandbox, Task
from lego_rl.proxy.server import ProxyServer
from lego_rl.registry import default_registry
from lego_rl.testing.contracts.base import ContractEnv
from lego_rl.testing.scripted_inference import ScriptedInference
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

ANTICHEAT = ("no-network", "git-history", "test-guard", "reward-guard", "process-reaper")


class KilledMidCommand:
    """Runs a long command; once it runs, its container is killed with the docker CLI."""

    dialect = "openai-chat"

    def __init__(self, docker_env: dict[str, str]):
        self.docker_env = docker_env
        self.killed: list[str] = []

    def preflight(self) -> list[Any]:
        return []

    def run(self, sandbox: Sandbox, task: Task, endpoint: Endpoint, timeout: float) -> HarnessResult:
        assert isinstance(sandbox, DockerSandbox)
        done = threading.Event()

        def kill_once_running() -> None:
            while not done.is_set():
                container = sandbox._container
                if container is not None and container._live:
                    subprocess.run(["docker", "kill", container.name], env=self.docker_env, check=True, capture_output=True)
                    self.killed.append(container.name)
                    return
                time.sleep(0.05)

        killer = threading.Thread(target=kill_once_running, daemon=True)
        killer.start()
        try:
            ran = sandbox.exec("echo fixing > notes.txt; sleep 600", timeout=timeout)
        finally:
            done.set()
            killer.join()
        return HarnessResult(Termination.COMPLETED, ran.exit_code, transcript=ran.stdout)


def run_trial(env: ContractEnv, backend: DockerBackend, harness: Harness, trial_id: str) -> TrialResult:
    ctx = env.build_context()
    proxy = ProxyServer(ScriptedInference(tiny_chat_tokenizer(), []), {"openai-chat": OpenAIChatDialect()}, model_name="policy")
    setup = TrialSetup(
        sandbox=backend, harness=harness, verifier=env.registry.build("verifier", "test-script", None, ctx),
        proxy=proxy, dialect="openai-chat", model_name="policy", sampling=Sampling(max_tokens=64),
        anticheat=[env.registry.build("anticheat", name, None, ctx) for name in ANTICHEAT],
    )  # fmt: skip
    proxy.start()
    try:
        return TrialRunner(setup).run(env.task("fix-add"), trial_id)
    finally:
        proxy.stop()


@pytest.fixture
def env(tmp_path: Path) -> ContractEnv:
    return ContractEnv(tmp_path, default_registry())


def test_a_container_killed_mid_trial_is_a_sandbox_error_and_the_next_trial_goes_on(env: ContractEnv) -> None:
    backend = env.registry.build("sandbox", "docker", None, env.build_context())
    assert isinstance(backend, DockerBackend)
    killer = KilledMidCommand(backend.docker.env)
    killed = run_trial(env, backend, killer, "docker-killed")
    assert len(killer.killed) == 1
    assert (killed.termination, killed.attribution, killed.reward) == (Termination.SANDBOX_ERROR, Attribution.INFRASTRUCTURE, 0.0)
    assert f"container {killer.killed[0]} stopped under the command" in killed.reason, killed.reason
    assert "exit code 137" in killed.reason and "killed from outside the trial" in killed.reason
    assert killed.verifier == {}, "no verification of a trial whose sandbox broke"
    assert [t.phase for t in killed.timings][-2:] == ["agent", "sandbox_stop"]

    solve = env.task("fix-add").path / "solution" / "solve.sh"
    after = run_trial(env, backend, ScriptedHarness(["bash /tmp/solve.sh"], uploads={str(solve): "/tmp/solve.sh"}), "docker-after-kill")
    assert (after.termination, after.reward) == (Termination.COMPLETED, 1.0), after.reason

    owner = f"label=legorl.docker.owner={backend.owner}"
    assert backend.docker.text("ps", "-a", "--filter", owner, "--format", "{{.Names}}") == "", "containers left"
    assert backend.docker.text("images", "--filter", owner, "--format", "{{.Repository}}:{{.Tag}}") == "", "trial images left"
    left = [p for p in Path(tempfile.gettempdir()).glob(f"{STATE_PREFIX}*") if (p / "owner").is_file() and (p / "owner").read_text() == backend.owner]
    assert left == [], f"socket dirs left: {left}"
