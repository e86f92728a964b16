"""A task image lacking what runs inside ends the trial ``sandbox_error`` with an error naming
what is missing: the sandbox's own needs (bash and sh, python3) when the image is built, a
harness's native binary's C library (its ELF loader) before the harness runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from legorl_claude_code.harness import native_binary
from legorl_std.harness.scripted import ScriptedHarness

from lego_rl.data import Attribution, Sampling, Termination, TrialResult
from lego_rl.engine.trial import TrialRunner, TrialSetup
from lego_rl.harness_kit import elf_interpreter
from lego_rl.kinds import Harness, Task
from lego_rl.proxy.server import ProxyServer
from lego_rl.registry import default_registry
from lego_rl.testing.contracts.base import ContractEnv
from lego_rl.testing.scripted_inference import ScriptedInference
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

GLIBC = "/lib64/ld-linux-x86-64.so.2"
MUSL = "/lib/ld-musl-x86_64.so.1"
NO_SHELL = """FROM python:3.12-slim
RUN ["python3", "-c", "import os; [os.remove(p) for p in ('/usr/bin/bash', '/bin/bash', '/usr/bin/sh', '/bin/sh') if os.path.lexists(p)]"]
WORKDIR /app
COPY app/ /app/
"""
NO_PYTHON = "FROM scratch\nWORKDIR /app\nCOPY app/ /app/\n"


@pytest.fixture
def env(tmp_path: Path) -> ContractEnv:
    return ContractEnv(tmp_path, default_registry())


def task_with(env: ContractEnv, tmp_path: Path, name: str, dockerfile: str | None) -> Task:
    task_dir = tmp_path / name
    subprocess.run(["cp", "-r", str(env.task("fix-add").path), str(task_dir)], check=True)
    if dockerfile is not None:
        (task_dir / "environment" / "Dockerfile").write_text(dockerfile)
    return env.task("fix-add").model_copy(update={"name": name, "path": task_dir})


def trial(env: ContractEnv, task: Task, harness: Harness, dialect: str = "openai-chat") -> TrialResult:
    ctx = env.build_context()
    codec = env.registry.build("dialect", dialect, None, ctx)
    proxy = ProxyServer(ScriptedInference(tiny_chat_tokenizer(), []), {dialect: codec}, model_name="policy")
    setup = TrialSetup(
        sandbox=env.registry.build("sandbox", "docker", None, ctx), harness=harness,
        verifier=env.registry.build("verifier", "test-script", None, ctx),
        proxy=proxy, dialect=dialect, model_name="policy", sampling=Sampling(),
    )  # fmt: skip
    proxy.start()
    try:
        return TrialRunner(setup).run(task, f"docker-needs-{task.name}")
    finally:
        proxy.stop()


def test_an_image_without_a_shell_names_bash_and_sh(env: ContractEnv, tmp_path: Path) -> None:
    result = trial(env, task_with(env, tmp_path, "no-shell", NO_SHELL), ScriptedHarness(["true"]))
    assert (result.termination, result.attribution) == (Termination.SANDBOX_ERROR, Attribution.INFRASTRUCTURE)
    assert "lacks what the docker sandbox runs inside: bash and sh on PATH in the task image" in result.reason, result.reason


def test_an_image_without_python3_names_it(env: ContractEnv, tmp_path: Path) -> None:
    result = trial(env, task_with(env, tmp_path, "no-python", NO_PYTHON), ScriptedHarness(["true"]))
    assert (result.termination, result.attribution) == (Termination.SANDBOX_ERROR, Attribution.INFRASTRUCTURE)
    assert "lacks what the docker sandbox runs inside: python3 on PATH" in result.reason, result.reason


def test_claude_code_is_linked_against_glibc() -> None:
    if not native_binary().is_file():
        pytest.skip("Claude Code is not installed (scripts/setup.sh)")
    assert elf_interpreter(native_binary()) == GLIBC
    assert elf_interpreter(Path("/etc/passwd")) is None


def test_a_native_binary_whose_c_library_the_image_lacks_is_named(env: ContractEnv, tmp_path: Path) -> None:
    """A binary linked against musl (its loader) in the glibc image: the same check that names
    glibc's loader for Claude Code's binary in an image without glibc (no such image can be
    built offline here: the sandbox's own python3 needs a C library, and no musl one exists)."""
    cli = tmp_path / "musl-cli" / "claude"
    cli.parent.mkdir()
    shutil.copy2("/bin/true", cli)
    data = cli.read_bytes()
    assert data.count(GLIBC.encode() + b"\0") == 1
    cli.write_bytes(data.replace(GLIBC.encode() + b"\0", MUSL.encode().ljust(len(GLIBC) + 1, b"\0")))
    assert elf_interpreter(cli) == MUSL
    harness = env.registry.build("harness", "claude-code", {"command": str(cli)}, env.build_context())
    result = trial(env, task_with(env, tmp_path, "glibc-image", None), harness, "anthropic-messages")
    assert (result.termination, result.attribution) == (Termination.SANDBOX_ERROR, Attribution.INFRASTRUCTURE)
    assert f"the task image has no {MUSL} (musl's dynamic loader), which Claude Code's native binary {cli}" in result.reason
    assert result.calls == 0 and result.reward == 0.0
