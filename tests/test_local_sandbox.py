"""The ``local`` sandbox (bubblewrap) and its Dockerfile interpreter."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import legorl_std.sandbox.local as local_sandbox
import pytest
from legorl_std.sandbox.commands import wait_exit
from legorl_std.sandbox.dockerfile import DockerfileError, materialise
from legorl_std.sandbox.local import LocalSandboxBackend, LocalSandboxOptions, SandboxError

from lego_rl.kinds import Sandbox, Task
from lego_rl.registry import BuildContext, Registry

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

DOCKERFILE = "FROM python:3.12-slim\nWORKDIR /app\nENV GREETING=hello\nCOPY app/ /app/\n"


def make_task(root: Path, dockerfile: str = DOCKERFILE, name: str = "t") -> Task:
    task = root / name
    (task / "environment" / "app").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text(dockerfile)
    (task / "environment" / "app" / "main.py").write_text("print('hi')\n")
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    return Task(name=name, path=task, instruction="do it")


@pytest.fixture
def backend(tmp_path: Path) -> LocalSandboxBackend:
    return LocalSandboxBackend(LocalSandboxOptions(), BuildContext(run_dir=tmp_path / "run"))


@pytest.fixture
def sandbox(backend: LocalSandboxBackend, tmp_path: Path) -> Iterator[local_sandbox.LocalSandbox]:
    box = backend.start(make_task(tmp_path), "trial-1")
    yield box
    box.stop()


def _alive(token: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        try:
            cmdline = (
                Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ") if entry.isdigit() else b""
            )
            if token.encode() in cmdline:
                pids.append(int(entry))
        except OSError:
            continue
    return pids


# ---------------------------------------------------------------- exec


def test_exec_runs_in_the_materialised_workdir(sandbox):
    assert isinstance(sandbox, Sandbox) and sandbox.workdir == "/app"
    out = sandbox.exec("pwd; ls; echo $GREETING; echo oops >&2; exit 3", timeout=30)
    assert (out.exit_code, out.stdout, out.stderr) == (3, "/app\nmain.py\nhello\n", "oops\n")
    assert not out.timed_out and out.seconds > 0
    assert sandbox.exec("pwd", timeout=30, cwd="/logs/verifier").stdout == "/logs/verifier\n"
    assert sandbox.exec("ls -d /logs/*", timeout=30).stdout.split() == [
        "/logs/agent", "/logs/artifacts", "/logs/verifier"
    ]  # fmt: skip


def test_clean_environment(sandbox, monkeypatch):
    monkeypatch.setenv("LEGORL_HOST_SECRET", "s3cret")
    out = sandbox.exec("env", timeout=30, env={"MINE": "1"})
    names = {line.split("=", 1)[0] for line in out.stdout.splitlines()}
    assert {"PATH", "HOME", "LANG", "GREETING", "MINE"} <= names
    assert "LEGORL_HOST_SECRET" not in names and "s3cret" not in out.stdout


def test_host_root_read_only_but_trial_files_writable(sandbox):
    out = sandbox.exec(
        "touch /usr/x; touch /x; echo fixed > main.py; echo $HOME > $HOME/h; echo t > /tmp/t", timeout=30
    )
    assert out.stderr.count("Read-only file system") == 2
    assert (sandbox.fs / "app" / "main.py").read_text() == "fixed\n"
    assert (sandbox.fs / "home" / "agent" / "h").read_text() == "/home/agent\n"
    assert sandbox.exec("cat /tmp/t", timeout=30).exit_code != 0, "/tmp must be private to each exec"


def test_lego_rls_interpreter_is_not_in_the_view_unless_exposed_and_our_sources_never(sandbox, tmp_path):
    """The packages installed beside lego-rl may hold a task's fix (a newer release of its
    project): the view shows the system's python3, not this process's environment."""
    assert sandbox.exec("python3 -c 'print(1)'", timeout=30).stdout == "1\n"
    for path in {sys.prefix, sys.base_prefix, os.path.dirname(sys.executable)}:
        assert sandbox.exec(f"test -e {path} || echo absent", timeout=30).stdout == "absent\n", path
    exposing = LocalSandboxBackend(
        LocalSandboxOptions(expose=[sys.prefix, sys.base_prefix]), BuildContext(run_dir=tmp_path / "exposing")
    )
    box = exposing.start(make_task(tmp_path, name="exposing"), "exposing")
    try:
        out = box.exec(f"{sys.executable} -c 'import pytest; print(pytest.__file__)'", timeout=60)
        assert out.exit_code == 0 and out.stdout.startswith("/") and not out.stderr, out
        for package in ("lego_rl", "legorl_std"):
            out = box.exec(f"{sys.executable} -c 'import {package}'", timeout=60)
            assert out.exit_code == 1 and f"No module named '{package}'" in out.stderr, out
    finally:
        box.stop()


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "polling"])
def test_wait_returns_the_exit_code_or_none_after_the_timeout(pidfd, monkeypatch):
    if not pidfd:  # a kernel without pidfd_open: the polling wait
        monkeypatch.setattr(os, "pidfd_open", lambda pid: (_ for _ in ()).throw(OSError(38, "ENOSYS")))
    with subprocess.Popen(["sh", "-c", "exit 7"]) as done:
        assert wait_exit(done, 10) == 7
    with subprocess.Popen(["sleep", "5"]) as slow:
        assert wait_exit(slow, 0.2) is None
        assert slow.poll() is None  # returned by its timeout: the process still runs
        slow.kill()


def test_timeout_kills_the_whole_process_tree(sandbox):
    token = f"{987 + uuid.uuid4().int % 1000}.{os.getpid()}"
    out = sandbox.exec(f"setsid nohup sleep {token} >/dev/null 2>&1 & sleep {token}", timeout=1)
    assert out.timed_out and out.exit_code == local_sandbox.TIMEOUT_EXIT  # sleep {token} runs ~900 s
    while _alive(f"sleep {token}"):  # until the kill lands; the per-test timeout bounds it
        time.sleep(0.05)
    assert _alive(f"sleep {token}") == []


def test_no_process_survives_an_exec(sandbox):
    token = f"{876 + uuid.uuid4().int % 1000}.{os.getpid()}"
    assert sandbox.exec(f"sleep {token} & echo started", timeout=30).stdout == "started\n"
    while _alive(f"sleep {token}"):  # until the kill lands; the per-test timeout bounds it
        time.sleep(0.05)
    assert _alive(f"sleep {token}") == []


def test_bwrap_setup_failure_is_a_sandbox_error(sandbox):
    shutil.rmtree(sandbox.fs / "home")
    with pytest.raises(SandboxError, match="bubblewrap could not set up trial trial-1"):
        sandbox.exec("true", timeout=30)


# ---------------------------------------------------------------- isolation


def test_other_trials_and_the_task_are_hidden(tmp_path: Path):
    # Outside /tmp on purpose: /tmp is private anyway, the tmpfs over the trials root must do the work.
    run_dir = Path(tempfile.mkdtemp(prefix="legorl-test-run-", dir="/var/tmp"))
    try:
        backend = LocalSandboxBackend(LocalSandboxOptions(), BuildContext(run_dir=run_dir))
        task = make_task(tmp_path)
        a, b = backend.start(task, "a"), backend.start(task, "b")
        (run_dir / "store.db").write_text("run store")
        assert (b.fs / "app" / "main.py").is_file() and a.trial_dir.parent == run_dir / "trials"
        for path in (b.fs / "app" / "main.py", run_dir / "store.db", task.path / "tests" / "test.sh"):
            out = a.exec(f"cat {path}", timeout=30)
            assert out.exit_code != 0 and "No such file" in out.stderr, out
        a.stop()
        b.stop()
    finally:
        shutil.rmtree(run_dir)


# ---------------------------------------------------------------- upload / download


def test_upload_download_round_trip(sandbox, tmp_path: Path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("A\n")
    (src / "sub" / "b.txt").write_text("B\n")
    sandbox.upload(src, "/tests")
    sandbox.upload(src / "a.txt", "/data/one.txt")
    sandbox.upload(src / "a.txt", "notes/a.txt")  # relative: under the workdir
    out = sandbox.exec("cat /tests/a.txt /tests/sub/b.txt /data/one.txt /app/notes/a.txt", timeout=30)
    assert out.stdout == "A\nB\nA\nA\n", out
    sandbox.exec("echo made > /tests/sub/c.txt; echo log > /logs/agent/x.log", timeout=30)
    sandbox.download("/tests", tmp_path / "back")
    assert sorted(p.name for p in (tmp_path / "back").rglob("*.txt")) == ["a.txt", "b.txt", "c.txt"]
    sandbox.download("/logs/agent/x.log", tmp_path / "x.log")
    assert (tmp_path / "x.log").read_text() == "log\n"
    with pytest.raises(FileNotFoundError, match="not kept between commands"):
        sandbox.download("/etc/hostname", tmp_path / "h")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        sandbox.download("/app/missing", tmp_path / "m")
    with pytest.raises(SandboxError):
        sandbox.upload(src, "/")


def test_download_refuses_a_symlink_out_of_the_trial(sandbox, tmp_path: Path):
    sandbox.exec("ln -s /etc/passwd /app/leak", timeout=30)
    with pytest.raises(SandboxError, match="outside the trial"):
        sandbox.download("/app/leak", tmp_path / "leak")


# ---------------------------------------------------------------- lifecycle


def test_stop_keeps_or_removes_the_trial_dir(backend, tmp_path: Path):
    task = make_task(tmp_path)
    kept = backend.start(task, "kept")
    kept.stop()
    assert (kept.trial_dir / "sandbox.json").is_file()
    gone = LocalSandboxBackend(LocalSandboxOptions(keep=False), BuildContext(run_dir=tmp_path / "r2"))
    box = gone.start(task, "gone")
    box.stop()
    assert not box.trial_dir.exists()


def test_trial_ids_are_unique_and_plain(backend, tmp_path: Path):
    task = make_task(tmp_path)
    backend.start(task, "same").stop()
    with pytest.raises(SandboxError, match="exists already"):
        backend.start(task, "same")
    with pytest.raises(SandboxError, match="plain file name"):
        backend.start(task, "../escape")


def test_construction_is_side_effect_free_and_registered(tmp_path: Path):
    registry = Registry()
    registry.add_module(local_sandbox, name="local-sandbox-under-test")
    backend = registry.build("sandbox", "local", {"root": "trials"}, BuildContext(spec_dir=tmp_path))
    assert not (tmp_path / "trials").exists()
    assert [p for p in backend.preflight() if p.fatal] == []
    box = backend.start(make_task(tmp_path), "x")
    box.stop()
    assert box.trial_dir == tmp_path / "trials" / "x"


def test_preflight_names_the_missing_bwrap():
    backend = LocalSandboxBackend(LocalSandboxOptions(bwrap="no-such-bwrap"), BuildContext())
    [problem] = backend.preflight()
    assert problem.fatal and "bubblewrap" in str(problem) and "apt-get install bubblewrap" in str(problem)


# ---------------------------------------------------------------- Dockerfile interpreter


def test_run_in_a_dockerfile_is_a_clear_error(backend, tmp_path: Path):
    task = make_task(tmp_path, DOCKERFILE + "RUN pip install numpy\n")
    with pytest.raises(
        DockerfileError, match=r"Dockerfile:5: the local sandbox cannot build `RUN`.*`harbor` sandbox"
    ):
        backend.start(task, "run")
    assert not (backend.root / "run").exists(), "a failed start leaves no trial dir behind"


def test_dockerfile_subset(tmp_path: Path):
    context = tmp_path / "ctx"
    (context / "src" / "pkg").mkdir(parents=True)
    (context / "src" / "pkg" / "m.py").write_text("x = 1\n")
    (context / "tool.sh").write_text("echo tool\n")
    (context / "Dockerfile").write_text(
        "# syntax=docker/dockerfile:1\n"
        "FROM --platform=linux/amd64 python:3.12-slim AS base\n"
        "ARG ROOT=/srv\n"
        "ENV PATH=/opt/bin:$PATH \\\n"
        '    NAME="two words"\n'
        "ENV LEGACY value with spaces\n"
        "WORKDIR ${ROOT}/project\n"
        "COPY src/ ./\n"
        "COPY --chmod=755 tool.sh /opt/bin/\n"
        "LABEL maintainer=me\n"
        'CMD ["bash"]\n'
    )
    image = materialise(context / "Dockerfile", tmp_path / "fs", {"PATH": "/usr/bin"})
    assert image.base == "python:3.12-slim" and image.workdir == "/srv/project"
    assert image.env == {"PATH": "/opt/bin:/usr/bin", "NAME": "two words", "LEGACY": "value with spaces"}
    assert (tmp_path / "fs" / "srv" / "project" / "pkg" / "m.py").read_text() == "x = 1\n"
    assert os.access(tmp_path / "fs" / "opt" / "bin" / "tool.sh", os.X_OK)
    assert sorted(image.mount_points) == ["/opt/bin/tool.sh", "/srv/project"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("WORKDIR /app\n", "no FROM"),
        ("FROM a\n", "Dockerfile: WORKDIR: the local sandbox cannot COPY onto / or work in /"),
        ("FROM a\nFROM b\n", "multi-stage"),
        ("FROM a\nCOPY --from=a /x /y\n", "--from"),
        ("FROM a\nCOPY ../secret /app/\n", "not found|outside the build context"),
        ("FROM a\nCOPY missing.txt /app/\n", "not found in the build context"),
        ("FROM a\nADD https://example.com/x.tgz /app/\n", "URL or an archive"),
        ("FROM a\nUSER nobody\n", "cannot build `USER`"),
    ],
)
def test_dockerfile_errors(tmp_path: Path, text: str, message: str):
    (tmp_path / "ctx").mkdir()
    (tmp_path / "secret").write_text("s")
    (tmp_path / "ctx" / "Dockerfile").write_text(text)
    with pytest.raises(DockerfileError, match=message):
        materialise(tmp_path / "ctx" / "Dockerfile", tmp_path / "fs")


# ---------------------------------------------------------------- isolation (issue 4)

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mounts, per-trial users)")


@pytest.fixture
def host_server():
    import http.server
    import threading

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *args):
            pass

    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield [server.server_address[1] for server in servers]
    for server in servers:
        server.shutdown()
        server.server_close()


def _get(url: str) -> str:
    return (
        "python3 -c 'import urllib.request as u; "
        f"print(u.urlopen(\"{url}\", timeout=3).read().decode())'"
    )


@root_only
def test_agent_phase_reaches_only_the_proxy(sandbox, host_server):
    proxy_port, other_port = host_server
    url = sandbox.endpoint_url(f"http://127.0.0.1:{proxy_port}/s/abc")
    assert url == f"http://127.0.0.1:{proxy_port}/s/abc"
    assert sandbox.exec(_get(url), timeout=30).stdout == "hello\n"
    out = sandbox.exec("cat /proc/net/dev", timeout=30)
    assert [line.split(":")[0].strip() for line in out.stdout.splitlines()[2:]] == ["lo"]
    blocked = sandbox.exec(_get(f"http://127.0.0.1:{other_port}/"), timeout=30)
    assert blocked.exit_code != 0 and "Connection refused" in blocked.stderr
    dns = sandbox.exec("getent hosts pypi.org", timeout=30)
    assert dns.exit_code != 0


@root_only
def test_trial_runs_as_its_own_user_without_capabilities(backend, sandbox, tmp_path):
    other = backend.start(make_task(tmp_path, name="u2"), "trial-2")
    try:
        me = sandbox.exec("id -u; id -un; grep CapEff /proc/self/status", timeout=30).stdout.split()
        assert me[0] == str(sandbox.user[0]) and me[1] == "agent" and me[-1] == "0000000000000000"
        assert other.user[0] != sandbox.user[0] and other.user[1] == sandbox.user[1]
        assert sandbox.exec("mount -t tmpfs x /app", timeout=30).exit_code != 0
        assert sandbox.exec("ls /root", timeout=30).stdout == ""
    finally:
        other.stop()


@root_only
def test_overlay_snapshot_records_the_agents_diff(sandbox):
    assert sandbox.describe(Task(name="t", path=Path("/x"), instruction="x"))["snapshot"] == "Overlay"
    sandbox.exec("echo \"print('fixed')\" > main.py; echo new > added.txt", timeout=30)
    kinds = {c.path: c.kind for c in sandbox.changes()}
    assert kinds["/app/main.py"] == "modified" and kinds["/app/added.txt"] == "added"
    diff = sandbox.diff()
    assert "-print('hi')" in diff and "+print('fixed')" in diff and "+++ b/app/added.txt" in diff


@root_only
def test_limits_apply_to_commands(tmp_path):
    from legorl_std.sandbox.limits import Limits

    options = LocalSandboxOptions(limits=Limits(nproc=20, file_size_mb=1, address_space_mb=512))
    backend = LocalSandboxBackend(options, BuildContext(run_dir=tmp_path / "run"))
    box = backend.start(make_task(tmp_path), "limited")
    try:
        big = box.exec("head -c 2000000 /dev/zero > big; echo $?", timeout=30)
        assert big.stdout.strip() != "0" and (box.fs / "app" / "big").stat().st_size == 1 << 20
        forks = box.exec("for i in $(seq 40); do sleep 5 & done 2>&1; wait", timeout=30)
        assert "Resource temporarily unavailable" in forks.stdout + forks.stderr
        memory = box.exec("python3 -c 'bytearray(1 << 30)'", timeout=30)
        assert "MemoryError" in memory.stderr
    finally:
        box.stop()


@root_only
def test_begin_verify_ends_the_agent_phase(backend, tmp_path, host_server):
    task = make_task(tmp_path)
    task.config["environment"] = {"network_mode": "public"}
    box = backend.start(task, "phases")
    try:
        box.endpoint_url(f"http://127.0.0.1:{host_server[0]}/s/x")
        box.exec("echo 1 > /logs/verifier/reward.txt; echo changed > main.py", timeout=30)
        box.upload(tmp_path / "t" / "tests", "/tests")
        details = box.begin_verify(task)
        assert details["agent_changes"] == ["M /app/main.py"]
        assert Path(details["agent_diff"]).read_text().count("+changed") == 1
        assert box.exec("ls -A /logs/verifier; ls /tests", timeout=30).stdout == ""
        out = box.exec("cat /proc/net/dev | wc -l; stat -c %U /logs/verifier", timeout=30).stdout.split()
        assert int(out[0]) > 3 and out[1] == "agent", "public network in the verify phase"
    finally:
        box.stop()
    assert (box.trial_dir / "logs" / "verifier").is_dir() and not (box.fs / "app").exists()


def test_a_task_without_a_dockerfile_names_the_harbor_sandbox(backend, tmp_path):
    task = make_task(tmp_path)
    (task.path / "environment" / "Dockerfile").unlink()
    task.config["environment"] = {"docker_image": "ghcr.io/x/y:1"}
    with pytest.raises(SandboxError, match=r"prebuilt image 'ghcr.io/x/y:1'.*`harbor` sandbox"):
        backend.start(task, "noimage")
