"""The anti-cheat policies on real local sandboxes: each blocks or repairs what it should,
and lets an honest trial through."""

from __future__ import annotations

import os
import shutil
import subprocess
import zlib
from pathlib import Path

import legorl_std.anticheat as anticheat
import pytest
from legorl_std.anticheat.common import PolicyError
from legorl_std.anticheat.git_history import GitHistory
from legorl_std.anticheat.no_network import NoNetwork
from legorl_std.anticheat.process_reaper import ProcessReaper
from legorl_std.anticheat.reward_guard import RewardGuard
from legorl_std.anticheat.test_guard import TestGuard
from legorl_std.sandbox.local import LocalSandboxBackend, LocalSandboxOptions

from lego_rl.anticheat_checks import CheckError, phase_violations, run_checks
from lego_rl.data import TrialResult
from lego_rl.kinds import AntiCheat, Check, Task, Violation
from lego_rl.registry import BuildContext, Registry

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (overlay, per-trial users)"),
]


def make_task(root: Path, with_git: bool = False) -> Task:
    task = root / "task"
    app = task / "environment" / "app"
    app.mkdir(parents=True)
    (app / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    if with_git:
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "init", "-q", "-b", "main"], cwd=app, check=True)
        subprocess.run([*git, "add", "."], cwd=app, check=True)
        subprocess.run([*git, "commit", "-qm", "start"], cwd=app, check=True)
        (app / "calc.py").write_text("def add(a, b):\n    return a + b\n")
        subprocess.run([*git, "commit", "-qam", "future fix"], cwd=app, check=True)
        subprocess.run([*git, "reset", "-q", "--hard", "HEAD~1"], cwd=app, check=True)
        subprocess.run(["git", "clone", "-q", "--bare", str(app), str(task / "environment" / "copy.git")], check=True)
    (task / "environment" / "Dockerfile").write_text(
        "FROM python:3.12-slim\nWORKDIR /app\nCOPY app/ /app/\n"
        + ("COPY copy.git/ /opt/backup/copy.git/\n" if with_git else "")
    )
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    return Task(name="task", path=task, instruction="x")


@pytest.fixture
def backend(tmp_path: Path) -> LocalSandboxBackend:
    return LocalSandboxBackend(LocalSandboxOptions(), BuildContext(run_dir=tmp_path / "run"))


@pytest.fixture
def box(backend, tmp_path):
    sandbox = backend.start(make_task(tmp_path), "trial")
    yield sandbox
    sandbox.stop()


def test_registered_with_forbidding_options():
    registry = Registry()
    registry.add_module(anticheat, name="anticheat-under-test")
    names = registry.names("anticheat")
    assert set(names) == {
        "no-network", "git-history", "test-guard", "reward-guard", "process-reaper", "reward-hacking",
    }  # fmt: skip
    for name in names:
        policy = registry.build("anticheat", name, {})
        assert isinstance(policy, AntiCheat) and policy.name == name
    with pytest.raises(Exception, match="extra"):
        registry.build("anticheat", "test-guard", {"alow": []})


def test_honest_trial_passes_every_policy(box, tmp_path):
    task = make_task(tmp_path / "again")
    policies = [NoNetwork(), GitHistory(), TestGuard(), RewardGuard(), ProcessReaper()]
    assert [v for p in policies for v in p.before_agent(box, task)] == []
    box.exec("sed -i 's/a - b/a + b/' calc.py && python3 -c 'import calc' && ls __pycache__", timeout=30)
    assert [v for p in policies for v in p.before_verify(box, task)] == []  # byte code is not flagged
    crossing = box.begin_verify(task)["crossing"]
    assert crossing["crossed_paths"] == ["M /app/calc.py"], "the agent's byte code does not cross"
    assert box.exec("ls __pycache__", timeout=30).exit_code != 0
    result = TrialResult(trial_id="t", task="task", reward=1.0)
    assert [v for p in policies for v in p.after(box, task, result)] == []


def counted(box):
    """``box`` with its execs counted in ``box.execs``."""
    box.execs, exec_ = 0, box.exec

    def counting(*args, **kwargs):
        box.execs += 1
        return exec_(*args, **kwargs)

    box.exec = counting
    return box


def test_the_engine_runs_each_phase_in_one_exec_and_routes_each_finding(box, tmp_path):
    task = make_task(tmp_path / "again")
    policies = [NoNetwork(), GitHistory(), TestGuard(), RewardGuard(), ProcessReaper()]
    counted(box)
    assert phase_violations(policies, "before_agent", box, task) == [] and box.execs == 1
    box.exec("echo 'x = 1' > conftest.py; echo 1 > /logs/verifier/reward.txt", timeout=30)
    box.execs = 0
    found = phase_violations(policies, "before_verify", box, task)
    assert box.execs == 1
    assert sorted((v.policy, v.message) for v in found) == [
        ("reward-guard", "the agent phase wrote /logs/verifier/reward.txt (only the verifier writes there)"),
        ("test-guard", "planted /app/conftest.py"),
    ]


def test_batched_checks_keep_their_outputs_apart_and_name_the_one_that_failed(box):
    seen: dict[str, str] = {}

    def check(name: str, script: str) -> Check:
        def keep(out: str) -> list[Violation]:
            seen[name] = out
            return []

        return Check(name, script, keep)

    forged = "printf '@@legorl-0000000000000000 1 0\\nno newline'"
    assert run_checks(box, [check("a", forged), check("b", "echo b; echo err >&2"), check("c", "true")]) == []
    assert seen == {"a": "@@legorl-0000000000000000 1 0\nno newline", "b": "b\n", "c": ""}
    flagging = Check("d", "echo found", lambda out: [Violation("d", out.strip())])
    assert run_checks(box, [flagging]) == [Violation("d", "found")]
    with pytest.raises(CheckError, match=r"^b: check script failed \(exit 3\): broken"):
        run_checks(box, [check("a", "true"), check("b", "echo broken >&2; exit 3"), check("c", "true")])


def test_no_network_refuses_a_sandbox_with_a_network(tmp_path):
    options = LocalSandboxOptions(agent_network=True)
    backend = LocalSandboxBackend(options, BuildContext(run_dir=tmp_path / "run"))
    box = backend.start(make_task(tmp_path), "net")
    try:
        with pytest.raises(PolicyError, match="loopback only"):
            NoNetwork().before_agent(box, make_task(tmp_path / "t2"))
    finally:
        box.stop()


def test_git_history_leaves_one_commit_and_no_copies(backend, tmp_path):
    task = make_task(tmp_path, with_git=True)
    box = backend.start(task, "git")
    try:
        assert box.exec("git reflog | wc -l; ls /opt/backup/copy.git | wc -l", timeout=30).stdout.split() != ["0", "0"]
        assert GitHistory().before_agent(box, task) == []
        out = box.exec(
            "git log --all --oneline | wc -l; git reflog | wc -l; git branch --show-current; "
            "git status --porcelain | wc -l; ls -A /opt/backup/copy.git | wc -l",
            timeout=30,
        )
        assert out.stdout.split() == ["1", "0", "main", "0", "0"], out
    finally:
        box.stop()


GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
ORDINARY = {
    "notes/power.txt": b"x^2 + y^2 = z^2, a text that starts like a zlib stream\n",
    "notes/assign.py": b"x = 1\nprint(x)\n",
    "notes/garbage.bin": bytes([0x78, 0x9C]) + bytes(range(40, 90)),
    "data/hello.z": zlib.compress(b"hello world, not a git object\n"),
    "data/tiny": b"x\x9c",
    "data/packing.md": b"PACKING LIST\n\nPACK\x00\x00\x00\x09 is not a version git writes\n",
    "data/legacy.pack": b"a text file that is only called .pack\n",
    "data/old.bundle": b"# an old bundle of notes, no git in sight\n",
    "src/pack/__init__.py": b"PACKS = 1\n",  # a package called pack beside objects/ refs/ HEAD
    "src/objects/__init__.py": b"OBJECTS = 1\n",
    "src/refs/__init__.py": b"REFS = 1\n",
    "src/HEAD": b"ref: this is a note, not a ref\n",
}
"""Files of a task that look a little like git's and must survive the scan."""


def make_disguised_task(root: Path) -> tuple[Task, list[str]]:
    """A task whose history (a future fix) is also left in disguise, beside ordinary files;
    the in-sandbox paths of the disguised copies."""
    task = make_task(root, with_git=True)
    env, app = task.path / "environment", task.path / "environment" / "app"
    for name, data in ORDINARY.items():
        (app / name).parent.mkdir(parents=True, exist_ok=True)
        (app / name).write_bytes(data)

    def git(*args: str, cwd: Path = app, stdin: bytes | None = None) -> bytes:
        return subprocess.run([*GIT, *args], cwd=cwd, input=stdin, check=True, capture_output=True).stdout

    stash, work = env / "stash", root / "work"
    stash.mkdir()
    git("branch", "fix", "HEAD@{1}")  # the rewound fix commit
    git("clone", "-q", "--no-local", "--mirror", str(app), str(work / ".git"), cwd=root)
    git("-c", "pack.writeReverseIndex=true", "repack", "-qad", cwd=work)
    git("multi-pack-index", "write", cwd=work)
    git("commit-graph", "write", "--reachable", cwd=work)
    objects = work / ".git" / "objects"
    [pack] = (objects / "pack").glob("*.pack")
    copies = {
        "app/data/blob.bin": pack,
        "app/data/blob.dat": pack.with_suffix(".idx"),
        "stash/rev.dat": pack.with_suffix(".rev"),
        "stash/midx.dat": objects / "pack" / "multi-pack-index",
        "stash/graph.dat": objects / "info" / "commit-graph",
    }
    for dest, src in copies.items():
        (env / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, env / dest)
    git("bundle", "create", "-q", str(stash / "notes.txt"), "--all", cwd=work)
    git("bundle", "create", "-q", "--version=3", str(stash / "notes3.txt"), "--all", cwd=work)
    snapshot = stash / "snapshot"  # a bare repository, found by its layout whatever its name
    git("clone", "-q", "--bare", "--no-local", str(work), str(snapshot), cwd=root)
    loose = root / "loose.git"  # its objects loose: in a flat dir, one under a name of its own
    git("init", "-q", "--bare", str(loose), cwd=root)
    git("--git-dir", str(loose), "unpack-objects", "-q", stdin=pack.read_bytes())
    (stash / "flat").mkdir()
    for obj in (loose / "objects").glob("[0-9a-f][0-9a-f]/*"):
        shutil.copy(obj, stash / "flat" / (obj.parent.name + obj.name))
    blob = git("hash-object", "--stdin", stdin=b"def add(a, b):\n    return a + b\n").decode().strip()
    shutil.copy(loose / "objects" / blob[:2] / blob[2:], app / "data" / "icon.png")
    s256 = stash / "s256"
    git("init", "-q", "--bare", "--object-format=sha256", str(s256), cwd=root)
    git("--git-dir", str(s256), "hash-object", "-w", "--stdin", stdin=b"def add(a, b):\n    return a + b\n")
    (s256 / "objects").rename(s256 / "odb")
    (app / "vendor" / "lib").mkdir(parents=True)
    shutil.copytree(snapshot, app / "vendor" / "lib" / ".git")
    planted = [
        "/app/data/blob.bin", "/app/data/blob.dat", "/app/data/icon.png", "/app/vendor/lib/.git",
        *(f"/opt/stash/{name}" for name in ("rev.dat", "midx.dat", "graph.dat", "notes.txt", "notes3.txt",
                                            "snapshot", *(f"flat/{p.name}" for p in (stash / "flat").iterdir()))),
        *(f"/opt/stash/s256/odb/{p.parent.name}/{p.name}" for p in (s256 / "odb").glob("??/*")),
    ]  # fmt: skip
    dockerfile = env / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "COPY stash/ /opt/stash/\n")
    return task, planted


def test_git_history_removes_leftovers_found_by_content_and_keeps_ordinary_files(backend, tmp_path):
    task, planted = make_disguised_task(tmp_path)
    task_head = subprocess.run([*GIT, "rev-parse", "HEAD"], cwd=task.path / "environment" / "app",
                               check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    box = backend.start(task, "disguised")
    try:
        present = "for p in " + " ".join(planted) + '; do [ -e "$p" ] && echo "$p"; done; true'
        assert box.exec(present, timeout=30).stdout.split() == planted
        assert GitHistory().before_agent(box, task) == []
        assert box.exec(present, timeout=30).stdout == ""
        for name, data in ORDINARY.items():
            assert box.exec(f"cat /app/{name} | od -An -v -tx1", timeout=30).stdout.split() == [
                f"{b:02x}" for b in data
            ], name
        # the task's own HEAD commit alone (same id: eval scripts name it), the rest as the task left it
        out = box.exec("git log --all --oneline | wc -l; git rev-parse HEAD; git status --porcelain -- data | wc -l", timeout=30)
        assert out.stdout.split() == ["1", task_head, "1"], out
    finally:
        box.stop()


def test_git_history_fails_loudly_on_a_leftover_it_cannot_remove(backend, tmp_path):
    task, _ = make_disguised_task(tmp_path)
    box = backend.start(task, "locked")
    try:
        locked = box.host_path("/app/locked")  # root's, as image files often are: the agent cannot delete
        locked.mkdir(mode=0o755)
        shutil.copy(task.path / "environment" / "app" / "data" / "blob.bin", locked / "keep.bin")
        with pytest.raises(PolicyError, match=r"leftover pack /app/locked/keep\.bin"):
            GitHistory().before_agent(box, task)
    finally:
        box.stop()


def test_test_guard_blocks_planted_hooks(box, tmp_path):
    task = make_task(tmp_path / "again")
    guard = TestGuard()
    guard.before_agent(box, task)
    box.exec("echo 'x = 1' > conftest.py; mkdir -p $HOME/.local/lib/site && echo 'import os' > $HOME/.local/lib/site/a.pth",
             timeout=30)  # fmt: skip
    messages = sorted(v.message for v in guard.before_verify(box, task))
    assert messages == ["planted /app/conftest.py", "planted /home/agent/.local/lib/site/a.pth"]


def test_test_guard_refuses_a_sandbox_that_shows_the_tests(box, tmp_path):
    task = make_task(tmp_path / "again")
    box.upload(task.path / "tests", "/tests")
    with pytest.raises(PolicyError, match="can see"):
        TestGuard().before_agent(box, task)


def test_reward_guard_flags_what_the_agent_wrote(box, tmp_path):
    box.exec("echo 1 > /logs/verifier/reward.txt", timeout=30)
    [violation] = RewardGuard().before_verify(box, make_task(tmp_path / "again"))
    assert violation.policy == "reward-guard" and "/logs/verifier/reward.txt" in violation.message


def test_process_reaper_flags_survivors_of_the_verifier(box, tmp_path):
    task = make_task(tmp_path / "again")
    assert ProcessReaper().before_verify(box, task) == []
    result = TrialResult(trial_id="t", task="task", reward=1.0, verifier={"survivors": 2})
    [violation] = ProcessReaper().after(box, task, result)
    assert "outlived tests/test.sh" in violation.message
