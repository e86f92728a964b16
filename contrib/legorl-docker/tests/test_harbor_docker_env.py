"""Harbor's own ``docker`` environment (Docker Compose v2), unmodified, on lego-rl's daemon with
no network: the ``harbor`` sandbox plugin adds, through Harbor's public environment config, an
``extra_docker_compose`` overlay that sets ``network_mode: none`` on the one service (and
``none`` for its build), so Compose creates no network (Harbor's own docker environment never
uses its ``docker-compose-no-network.yaml``; a task's ``network_mode = "no-network"`` would turn
on its egress-control sidecar, which needs a network: the plugin passes no network policy).
Oracle 1, doing nothing 0, with the no-network policy on; the daemon's networks are the same
after as before and nothing of the trials is left. Claude Code's and Codex's native CLIs and
mini-swe-agent (its virtualenv and interpreter) run inside Harbor's container, mounted
read-only, with the headline spec's anti-cheat policies, and reach the proxy only through the
trial's socket."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from legorl_docker.cli import Docker
from legorl_std.dialects.openai_chat import OpenAIChatDialect
from legorl_std.harness.scripted import ScriptedHarness
from test_docker_native_harnesses import native_trial

from lego_rl.data import Attribution, Sampling, Termination, TrialResult
from lego_rl.engine.trial import TrialRunner, TrialSetup
from lego_rl.kinds import Task, first_fatal
from lego_rl.proxy.server import ProxyServer
from lego_rl.registry import default_registry
from lego_rl.testing.contracts import CONFORMANCE_COMMANDS
from lego_rl.testing.contracts.base import ContractEnv
from lego_rl.testing.scripted_inference import ScriptedInference
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

pytestmark = pytest.mark.slow


@pytest.fixture
def env(tmp_path: Path, docker_host: str, monkeypatch: pytest.MonkeyPatch) -> ContractEnv:
    monkeypatch.setenv("DOCKER_HOST", docker_host)  # Harbor's docker CLI calls reach our daemon
    monkeypatch.setenv("DOCKER_BUILDKIT", "0")  # the classic builder: `network: none` holds for every RUN
    return ContractEnv(tmp_path, default_registry())


BASE = "FROM legorl/base:bookworm\nWORKDIR /app\nCOPY app/ /app/\n"
NO_SHELL = """FROM legorl/base:bookworm
RUN ["python3", "-c", "import os; [os.remove(p) for p in ('/usr/bin/bash', '/bin/bash', '/usr/bin/sh', '/bin/sh') if os.path.lexists(p)]"]
WORKDIR /app
COPY app/ /app/
"""
NO_PYTHON = "FROM scratch\nWORKDIR /app\nCOPY app/ /app/\n"


def harbor_task(env: ContractEnv, tmp_path: Path, dockerfile: str = BASE, name: str = "fix-add") -> Task:
    """The kit's fix-add task built on the offline base image (Harbor replaces no FROM); its
    image is named after ``name``."""
    task_dir = tmp_path / name
    subprocess.run(["cp", "-r", str(env.task("fix-add").path), str(task_dir)], check=True)
    (task_dir / "environment" / "Dockerfile").write_text(dockerfile)
    return env.task("fix-add").model_copy(update={"name": name, "path": task_dir})


def trial(
    env: ContractEnv, tmp_path: Path, harness: ScriptedHarness, trial_id: str, task: Task | None = None
) -> TrialResult:
    ctx = env.build_context()
    options = {"environment": {"type": "docker"}}
    backend = env.registry.build("sandbox", "harbor", options, ctx)
    if (problem := first_fatal(backend.preflight())) is not None:
        pytest.fail(f"Harbor's docker environment is not usable on the daemon: {problem.message}")
    proxy = ProxyServer(
        ScriptedInference(tiny_chat_tokenizer(), []), {"openai-chat": OpenAIChatDialect()}, model_name="policy"
    )
    setup = TrialSetup(
        sandbox=backend, harness=harness, verifier=env.registry.build("verifier", "test-script", None, ctx),
        proxy=proxy, dialect="openai-chat", model_name="policy", sampling=Sampling(max_tokens=16),
        anticheat=[env.registry.build("anticheat", "no-network", None, ctx)],
    )  # fmt: skip
    proxy.start()
    try:
        return TrialRunner(setup).run(task or harbor_task(env, tmp_path), trial_id)
    finally:
        proxy.stop()


@pytest.mark.parametrize(("solve", "reward"), [(True, 1.0), (False, 0.0)], ids=["oracle", "no-op"])
def test_harbor_docker_environment_with_no_network(
    env: ContractEnv, tmp_path: Path, docker_host: str, solve: bool, reward: float
) -> None:
    docker = Docker(docker_host)
    networks = docker.text("network", "ls", "--format", "{{.Name}} {{.Driver}}")
    script = env.task("fix-add").path / "solution" / "solve.sh"
    harness = (
        ScriptedHarness(["bash /tmp/solve.sh"], uploads={str(script): "/tmp/solve.sh"})
        if solve
        else ScriptedHarness([])
    )
    result = trial(env, tmp_path, harness, f"harbor-docker-{int(reward)}")
    assert (result.termination, result.reward) == (Termination.COMPLETED, reward), (
        result.reason,
        {k: v for k, v in result.verifier.items() if "tail" in k or k == "exit_code"},
    )
    assert result.verifier["pristine"] is True, "verified in a fresh container of the task's image"
    assert result.verifier["crossing"]["crossed"] == (1 if solve else 0), result.verifier["crossing"]
    assert docker.text("network", "ls", "--format", "{{.Name}} {{.Driver}}") == networks, "Compose made a network"
    assert left(docker, f"harbor-docker-{int(reward)}") == ""


@pytest.mark.parametrize(
    ("lacks", "dockerfile", "named"),
    [("python3", NO_PYTHON, "python3 on PATH"), ("shell", NO_SHELL, "bash on PATH in the task image")],
)
def test_an_image_lacking_what_the_sandbox_runs_inside_is_named(
    env: ContractEnv, tmp_path: Path, docker_host: str, lacks: str, dockerfile: str, named: str
) -> None:
    """The container's init needs the image's python3 and every command runs as bash -c: an
    image without them ends the trial sandbox_error (infrastructure) naming what to add, not
    the engine's error, and leaves no container behind."""
    trial_id, name = f"harbor-no-{lacks}", f"fix-add-no-{lacks}"
    result = trial(env, tmp_path, ScriptedHarness(["true"]), trial_id, harbor_task(env, tmp_path, dockerfile, name))
    assert (result.termination, result.attribution) == (Termination.SANDBOX_ERROR, Attribution.INFRASTRUCTURE)
    assert f"the image of task {name} lacks what the harbor sandbox runs inside: {named}" in result.reason, (
        result.reason
    )
    assert result.calls == 0
    assert left(Docker(docker_host), trial_id) == ""


def left(docker: Docker, trial_id: str) -> str:
    """The containers of a trial's Compose projects (its agent's and its verification's) still
    there."""
    return "".join(
        docker.text("ps", "-a", "--filter", f"label=com.docker.compose.project={project}", "--format", "{{.Names}}")
        for project in (trial_id, f"{trial_id}-verify")
    )


@pytest.mark.parametrize("verified", [True, False], ids=["verified", "stopped-in-agent-phase"])
def test_the_verification_container_starts_while_the_agent_works(
    env: ContractEnv, tmp_path: Path, docker_host: str, verified: bool
) -> None:
    """``prestart_verify``: once the agent phase begins, the verification's fresh container of
    the task's image starts beside the agent's; verification takes it (the agent's change
    crossed, nothing else of the agent's container), and a trial stopped in its agent phase
    stops both."""
    docker, trial_id = Docker(docker_host), f"harbor-prestart-{verified}".lower()
    backend = env.registry.build("sandbox", "harbor", {"environment": {"type": "docker"}}, env.build_context())
    task = harbor_task(env, tmp_path)
    box = backend.start(task, trial_id)
    try:
        assert box.exec("cat /etc/hostname", timeout=60).exit_code == 0
        box.begin_agent()
        phase, ahead = box._prestarted
        verify_environment = ahead.result()[0]  # started while the agent phase goes on
        assert phase == "verify" and box.exec("echo agent-side > /tmp/trace", timeout=60).exit_code == 0
        running = docker.text("ps", "--filter", f"label=com.docker.compose.project={trial_id}-verify", "--format", "{{.Names}}")
        assert running.strip(), "no verification container runs during the agent phase"
        if verified:
            assert box.exec("echo fixed > fix.txt", timeout=60).exit_code == 0
            report = box.begin_verify(task)
            assert report["pristine"] is True and box._environment is verify_environment
            assert box.exec("cat fix.txt", timeout=60).stdout.strip() == "fixed", "the agent's change crossed"
            assert box.exec("test -e /tmp/trace", timeout=60).exit_code == 1, "nothing else of the agent's container"
    finally:
        box.stop()
    assert left(docker, trial_id) == ""


@pytest.mark.parametrize("name", ["claude-code", "codex", "mini-swe-agent"])
def test_a_harness_in_harbors_container_reaches_the_proxy_through_its_socket(
    env: ContractEnv, tmp_path: Path, docker_host: str, name: str
) -> None:
    docker = Docker(docker_host)
    trial_id = f"harbor-{name}"
    task = harbor_task(env, tmp_path)
    result, calls, backend, _ = native_trial(
        tmp_path, name, CONFORMANCE_COMMANDS, trial_id, task, sandbox=("harbor", {"environment": {"type": "docker"}})
    )
    transcript = result.harness.get("transcript", "")[-3000:]
    assert (result.termination, result.reward) == (Termination.COMPLETED, 1.0), (
        result.reason,
        result.verifier,
        transcript,
    )
    assert result.calls == len(calls) >= len(CONFORMANCE_COMMANDS) + 1
    assert not (backend.started[0]._run_dir("") / "proxy.sock").exists(), "the trial's socket outlived it"
    assert left(docker, trial_id) == ""
