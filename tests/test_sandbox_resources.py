"""The local sandbox's resource limits: a task's declared memory and CPUs are enforced, a
limit the trial runs into ends it as ``resource_limit`` (the policy's), and what a killed
process left behind (mounts, cgroups) is swept by the next backend in the same run dir."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from legorl_std.dialects.openai_chat import OpenAIChatDialect
from legorl_std.harness.scripted import ScriptedHarness
from legorl_std.sandbox import local as local_sandbox
from legorl_std.sandbox.limits import Limits, cgroup_parents
from legorl_std.sandbox.local import (
    LocalSandboxBackend,
    LocalSandboxOptions,
    SandboxError,
)
from legorl_std.verifier.test_script import ScriptVerifier

from lego_rl.data import Attribution, Sampling, Termination
from lego_rl.engine.trial import TrialRunner, TrialSetup
from lego_rl.kinds import Task
from lego_rl.proxy.server import ProxyServer
from lego_rl.registry import BuildContext
from lego_rl.testing.scripted_inference import ScriptedInference
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mounts, per-trial users, cgroups)"),
]
CGROUPS = set(cgroup_parents())
needs_cgroups = pytest.mark.skipif(
    not {"memory", "pids", "cpu"} <= CGROUPS, reason=f"needs writable memory/pids/cpu cgroups, has {CGROUPS}"
)
HOG = "python3 -c 'x = bytearray(256 << 20); print(len(x))'"


def make_task(root: Path, **environment: object) -> Task:
    task = root / "t"
    (task / "environment" / "app").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM python:3.12-slim\nWORKDIR /app\nCOPY app/ /app/\n")
    (task / "environment" / "app" / "main.py").write_text("print('hi')\n")
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    return Task(name="t", path=task, instruction="do it", config={"environment": environment})


def backend_in(run_dir: Path, **options: object) -> LocalSandboxBackend:
    return LocalSandboxBackend(LocalSandboxOptions(**options), BuildContext(run_dir=run_dir))  # type: ignore[arg-type]


def run_trial(backend: LocalSandboxBackend, task: Task, commands: list[str], name: str = "trial"):
    proxy = ProxyServer(
        ScriptedInference(tiny_chat_tokenizer(), []), {"openai-chat": OpenAIChatDialect()}, model_name="policy"
    )
    proxy.start()
    try:
        setup = TrialSetup(
            sandbox=backend, harness=ScriptedHarness(commands), verifier=ScriptVerifier(), proxy=proxy,
            dialect="openai-chat", model_name="policy", sampling=Sampling(),
        )  # fmt: skip
        return TrialRunner(setup).run(task, name)
    finally:
        proxy.stop()


# ---------------------------------------------------------------- declared memory and CPUs


@needs_cgroups
def test_a_memory_hog_above_memory_mb_ends_the_trial_as_resource_limit(tmp_path):
    result = run_trial(backend_in(tmp_path / "run"), make_task(tmp_path, memory_mb=64), [HOG, "echo after"])
    assert result.termination == Termination.RESOURCE_LIMIT and result.attribution == Attribution.POLICY
    assert result.reason.startswith("memory_mb=64 (agent phase: 1 OOM kill")
    assert "[exit 137]" in result.harness["transcript"] and "268435456" not in result.harness["transcript"]
    assert result.reward == 1.0, "the verifier still ran (the run goes on)"
    agent = next(t.seconds for t in result.timings if t.phase == "agent")
    assert agent < 10


@needs_cgroups
def test_declared_cpus_and_processes_are_trial_cgroups(tmp_path):
    box = backend_in(tmp_path / "run", limits=Limits(nproc=40)).start(make_task(tmp_path, cpus=0.5), "cpu")
    try:
        described = json.loads((box.trial_dir / "sandbox.json").read_text())
        dirs = {k: Path(v) for k, v in described["cgroup"].items()}
        v1 = dirs["cpu"] / "cpu.cfs_quota_us"
        quota = v1.read_text() if v1.exists() else (dirs["cpu"] / "cpu.max").read_text().split()[0]
        assert int(quota) == 50_000 and "memory" not in dirs, "no memory_mb declared: no memory cgroup"
        inside = box.exec("cat /proc/self/cgroup", timeout=30).stdout
        assert all(p.name in inside for p in dirs.values())
        box.exec("for i in $(seq 60); do sleep 5 & done 2>/dev/null; wait", timeout=30)
        assert [e["limit"] for e in box.resources_exhausted()] == ["nproc=40"]
    finally:
        box.stop()
    assert not any(p.exists() for p in dirs.values()), "stop removes the trial's cgroups"


def test_without_cgroups_memory_is_an_address_space_limit_and_cpus_an_affinity(tmp_path, monkeypatch):
    monkeypatch.setattr(local_sandbox, "cgroup_parents", dict)
    monkeypatch.setattr("legorl_std.sandbox.limits.cgroup_parents", dict)
    backend = backend_in(tmp_path / "run")
    assert any("no writable cgroup" in p.message and not p.fatal for p in backend.preflight())
    box = backend.start(make_task(tmp_path, memory_mb=64, cpus=1), "fallback")
    try:
        out = box.exec(f"nproc; {HOG}", timeout=30)
        assert out.stdout.split()[0] == "1" and "MemoryError" in out.stderr
    finally:
        box.stop()


def test_declared_resources_must_be_positive_numbers(tmp_path):
    with pytest.raises(SandboxError, match=r"\[environment\] memory_mb must be a positive number, got '2G'"):
        backend_in(tmp_path / "run").start(make_task(tmp_path, memory_mb="2G"), "bad")
    assert not (tmp_path / "run" / "trials" / "bad").exists()


# ---------------------------------------------------------------- rlimits and storage


def test_file_size_cpu_time_and_storage_name_their_limit(tmp_path):
    backend = backend_in(tmp_path / "run", limits=Limits(file_size_mb=1, cpu_seconds=1))
    task = make_task(tmp_path, storage_mb=8)
    box = backend.start(task, "limits")
    try:
        assert box.exec("head -c 2000000 /dev/zero > big", timeout=30).exit_code == 128 + signal.SIGXFSZ
        assert box.exec("while :; do :; done", timeout=30).exit_code == 128 + signal.SIGXCPU
        box.exec("for i in $(seq 12); do head -c 1000000 /dev/zero > f$i; done", timeout=30)
        box.begin_verify(task)
        limits = [(e["phase"], e["limit"]) for e in box.resources_exhausted()]
        assert limits == [
            ("agent", "file_size_mb=1"), ("agent", "cpu_seconds=1"), ("agent", "storage_mb=8"),
        ]  # fmt: skip  (the verifier starts on a fresh copy: not full, the files did not cross)
    finally:
        box.stop()


def test_a_file_cut_at_the_size_limit_is_found_at_the_end_of_the_agent_phase(tmp_path):
    task = make_task(tmp_path)
    box = backend_in(tmp_path / "run", limits=Limits(file_size_mb=1)).start(task, "cut")
    try:
        box.exec("(head -c 2000000 /dev/zero > cut.bin); true", timeout=30)  # the writer dies, bash lives
        assert box.resources_exhausted() == []
        box.begin_verify(task)
        assert box.resources_exhausted() == [
            {"phase": "agent", "limit": "file_size_mb=1", "detail": "/app/cut.bin stopped at the limit"}
        ]
    finally:
        box.stop()


# ---------------------------------------------------------------- leftovers of a killed process

LEAK = """
import os, signal, sys
sys.path[:0] = {paths!r}
from lego_rl.kinds import Task
from lego_rl.registry import BuildContext
from legorl_std.sandbox.local import LocalSandboxBackend, LocalSandboxOptions
from pathlib import Path
task = Task(name="t", path=Path({task!r}), instruction="", config={{"environment": {{"memory_mb": 64}}}})
backend = LocalSandboxBackend(LocalSandboxOptions(), BuildContext(run_dir=Path({run!r})))
box = backend.start(task, "leaked")
print("started", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path) + "/"
    return [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines() if line.split()[4].startswith(prefix)]


def test_a_new_backend_sweeps_the_mounts_and_cgroups_of_a_killed_process(tmp_path):
    task, run = make_task(tmp_path), tmp_path / "run"
    script = LEAK.format(paths=sys.path, task=str(task.path), run=str(run))
    child = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], check=False, capture_output=True, text=True, timeout=60)
    assert child.returncode == -signal.SIGKILL and child.stdout == "started\n", child.stderr
    leaked = _mounts_under(run)
    assert sorted(Path(m).name for m in leaked) == ["fs", "rw"]
    cgroups = [e for root, _v2 in cgroup_parents().values() for e in root.glob("legorl-trial-*-leaked")]
    assert len(cgroups) == len({"memory", "pids"} & CGROUPS)
    box = backend_in(run).start(task, "next")
    try:
        assert all(m.startswith(str(box.trial_dir)) for m in _mounts_under(run)), "the leaked mounts are gone"
        assert not any(p.exists() for p in cgroups)
    finally:
        box.stop()
    assert _mounts_under(run) == []
