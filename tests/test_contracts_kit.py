"""The conformance kit's isolation, limits, red-team and SDK round-trip contracts catch
broken plugins: test doubles that each break one promise, and the real local sandbox
configured unsafely."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from legorl_std.dialects.openai_chat import OpenAIChatDialect
from legorl_std.sandbox.local import LocalSandboxBackend, LocalSandboxOptions

from lego_rl.kinds import ExecResult, Task
from lego_rl.registry import default_registry
from lego_rl.testing.contracts import ContractEnv, ContractError, base, contract_named
from lego_rl.testing.contracts.dialect_sdk import need

local_sandbox = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0,
    reason="the local sandbox needs bubblewrap, as root (overlay, per-trial users)",
)


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A contract env whose kit tasks are a private copy (a leaky double may write there)."""
    tasks = tmp_path / "kit-tasks"
    shutil.copytree(base.conformance_tasks_dir(), tasks)
    monkeypatch.setattr(base, "conformance_tasks_dir", lambda: tasks)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return ContractEnv(scratch, default_registry())


def breach(contract_id: str, component: Any, env: ContractEnv) -> str:
    with pytest.raises(ContractError) as info:
        contract_named(contract_id).check(component, env)
    return str(info.value)


# ------------------------------------------------------------------ sandbox doubles


class HostSandbox:
    """Runs commands straight on this host in a copy of the task's files: no isolation, and
    a timeout kills only the shell, not what it started."""

    def __init__(self, task: Task, root: Path):
        self.workdir = str(root / "app")
        shutil.copytree(task.path / "environment" / "app", self.workdir)

    def exec(
        self, command: str, *, timeout: float, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> ExecResult:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                ["bash", "-c", command],
                cwd=cwd or self.workdir,
                stdout=out,
                stderr=err,
                env={**os.environ, **(env or {})},
            )
            try:
                code, timed_out = proc.wait(timeout=timeout), False
            except subprocess.TimeoutExpired:
                proc.kill()
                code, timed_out = proc.wait(), True
            out.seek(0)
            err.seek(0)
            return ExecResult(
                code, out.read().decode(errors="replace"), err.read().decode(errors="replace"), timed_out
            )

    def upload(self, src: Path, dst: str) -> None:
        shutil.copy(src, dst)

    def download(self, src: str, dst: Path) -> None:
        shutil.copy(src, dst)

    def endpoint_url(self, host_url: str) -> str:
        return host_url

    def stop(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


class HostBackend:
    def __init__(self, root: Path):
        self.trials = root

    def preflight(self) -> list[Any]:
        return []

    def start(self, task: Task, trial_id: str) -> HostSandbox:
        return HostSandbox(task, self.trials / trial_id)


class SharedBackend:
    """The real local sandbox, but every start hands out the same one: trials share files."""

    def __init__(self, backend: LocalSandboxBackend):
        self.backend = backend
        self.sandbox: Any = None

    def preflight(self) -> list[Any]:
        return self.backend.preflight()

    def start(self, task: Task, trial_id: str) -> Any:
        self.sandbox = self.sandbox or self.backend.start(task, trial_id)
        return self.sandbox


def local(env: ContractEnv, **options: Any) -> LocalSandboxBackend:
    return LocalSandboxBackend(LocalSandboxOptions(**options), env.build_context())


def test_isolation_catches_a_backend_that_shows_the_host(env, tmp_path):
    message = breach("sandbox.isolation", HostBackend(tmp_path / "host-trials"), env)
    assert "a file in the run directory" in message and "readable inside the sandbox" in message
    assert not list(env.tasks_dir.glob("*/legorl-escape-*")), "the contract cleans up what leaked"


def test_limits_catch_background_processes_that_outlive_a_timeout(env, tmp_path):
    message = breach("sandbox.limits", HostBackend(tmp_path / "host-trials"), env)
    assert "still ran on the host" in message and "process tree" in message


@local_sandbox
@pytest.mark.parametrize(
    ("contract_id", "finding"),
    [
        ("sandbox.isolation", "connected to 127.0.0.1:"),
        (
            "sandbox.redteam",
            "attack net-http-loopback (fetch the fix from a host server on 127.0.0.1) got the fix",
        ),
    ],
    ids=["isolation", "redteam"],
)
def test_the_host_network_fails_isolation_and_redteam(env, contract_id, finding):
    assert finding in breach(contract_id, local(env, agent_network=True), env)


@local_sandbox
def test_sandboxes_sharing_files_fail_isolation(env):
    message = breach("sandbox.isolation", SharedBackend(local(env)), env)
    assert "readable in another sandbox" in message


def test_pristine_verify_catches_a_sandbox_that_verifies_where_the_agent_worked(env, tmp_path):
    message = breach("sandbox.pristine-verify", HostBackend(tmp_path / "host-trials"), env)
    assert "PristineVerify" in message and "fresh copy" in message


class InPlace:
    """The real local sandbox, whose verification claims a fresh copy but stays in the agent's."""

    def __init__(self, backend: LocalSandboxBackend):
        self.backend = backend

    def preflight(self) -> list[Any]:
        return self.backend.preflight()

    def start(self, task: Task, trial_id: str) -> Any:
        box = self.backend.start(task, trial_id)
        box.begin_verify = lambda task: {"crossing": {"crossed_paths": [], "dropped_paths": []}}
        return box


@local_sandbox
def test_pristine_verify_catches_verification_in_the_agents_copy(env):
    message = breach("sandbox.pristine-verify", InPlace(local(env)), env)
    assert "/app/conftest.py is in the verification copy" in message


@local_sandbox
def test_limits_catch_storage_beyond_what_the_task_declares(env):
    message = breach("sandbox.limits", local(env, storage_mb=4096), env)
    assert "storage_mb = 64" in message and "wrote 256 MB" in message


# ------------------------------------------------------------------ dialect doubles


class Tampered:
    """A real dialect with some of its attributes replaced (instance attributes, so that
    isinstance checks against the Dialect protocols see them all)."""

    def __init__(self, inner: Any, **replaced: Any):
        for attr in ("name", "routes", "parse", "format", "error", "stream"):
            setattr(self, attr, replaced.pop(attr, getattr(inner, attr)))
        self.__dict__.update(replaced)


def chat(**methods: Any) -> Tampered:
    return Tampered(OpenAIChatDialect(), **methods)


def test_sdk_round_trip_catches_a_format_that_drops_the_text(env):
    inner = OpenAIChatDialect()

    def format(request, completion, call_id):
        return inner.format(request, dataclasses.replace(completion, content=""), call_id)

    message = breach("dialect.sdk-round-trip", Tampered(inner, format=format), env)
    assert "a plain completion: the client read ''" in message


def test_sdk_round_trip_catches_a_parse_that_loses_the_user_message(env):
    inner = OpenAIChatDialect()

    def parse(body):
        request = inner.parse(body)
        request.messages[0].content = "?"
        return request

    message = breach("dialect.sdk-round-trip", Tampered(inner, parse=parse), env)
    assert "call 0: the prompt the policy saw lacks the request's" in message


def test_another_dialect_needs_conformance_request(env):
    message = breach("dialect.sdk-round-trip", chat(name="house-chat"), env)
    assert "add conformance_request(text: str) -> tuple[str, dict]" in message


def own_request(text: str) -> tuple[str, dict[str, Any]]:
    return "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": text}]}


def test_another_dialect_round_trips_its_own_request(env):
    contract_named("dialect.sdk-round-trip").check(
        chat(name="house-chat", conformance_request=own_request), env
    )
    bad = chat(name="house-chat", conformance_request=lambda text: ("/v1/nowhere", own_request(text)[1]))
    assert "POST /v1/nowhere with conformance_request's body answered 404" in breach(
        "dialect.sdk-round-trip", bad, env
    )


def test_a_missing_client_package_is_named_with_its_install_line():
    with pytest.raises(ContractError, match=r"pip install legorl_no_such_client"):
        need("legorl_no_such_client", "a contract")
