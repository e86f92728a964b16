"""Git leftovers found by content: the scan itself on this host (any file name, files that
go missing mid-batch, every zlib header), and the disguised leftovers of the red-team task:
each attack of ``GIT_ATTACKS`` takes the fix when nothing stops it, and gets nothing once
``git-history`` has run, alone and through the whole trial pipeline."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import zlib
from pathlib import Path

import legorl_std.redteam.suite as suite
import pytest
from legorl_std.anticheat.git_history import GitHistory
from legorl_std.anticheat.git_leftovers import SETUP, SIGNATURES, scan
from legorl_std.redteam.attacks_git import GIT_ATTACKS
from legorl_std.redteam.task import BUGGY, FIXED, Target, build_task
from legorl_std.sandbox.local import LocalSandboxBackend, LocalSandboxOptions

from lego_rl.kinds import Task
from lego_rl.registry import BuildContext

SANDBOXED = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (overlay, per-trial users)"),
]


def sandboxed(test):
    for mark in SANDBOXED:
        test = mark(test)
    return test


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Target:
    """The red-team calc task, prepared as the suite prepares it (with the disguised copies)."""
    return build_task(tmp_path_factory.mktemp("tasks"))


@pytest.fixture(scope="module")
def task(target: Target) -> Task:
    return target.task


@pytest.fixture
def backend(tmp_path: Path) -> LocalSandboxBackend:
    return LocalSandboxBackend(LocalSandboxOptions(), BuildContext(run_dir=tmp_path / "run"))


def scan_here(paths: list[str], body: str, workdir: str = "/nonexistent") -> subprocess.CompletedProcess:
    """``body`` after the scan's setup, on this host, with ``$1``... the ``paths``."""
    script = f"W={workdir}\n{SETUP}\nexec 3>&2\n{body}"
    return subprocess.run(["bash", "-c", script, "scan", *paths], capture_output=True, text=True, check=True)


def test_the_scan_reads_any_name_and_lines_files_up_again_when_one_is_short_or_gone(tmp_path):
    pack = subprocess.run(["git", "pack-objects", "--stdout"], input=b"", capture_output=True, check=True).stdout
    names = ["plain", "with space", "new\nline", "-dash"]
    for name in names:
        (tmp_path / name).write_bytes(pack)
    (tmp_path / "text").write_text("x^2 is not a zlib stream, and git says so\n")
    (tmp_path / "short").write_text("PACK\n")  # find passes no such file: the batch's lines shift
    paths = [str(tmp_path / n) for n in ["plain", "gone", "short", "text", "with space", "new\nline", "-dash"]]
    batch = scan_here(paths, 'sh -c "$SCAN" scan report file "$@"').stdout
    assert batch == "".join(f"leftover pack {tmp_path / n}\n" for n in names)
    found = scan_here([], scan([str(tmp_path)], "report")).stdout
    assert sorted(found.split("leftover ")[1:]) == sorted(f"pack {tmp_path / n}\n" for n in names)
    removal = scan_here([], scan([str(tmp_path)], "remove") + '\n[ -e "$S/removed" ] && echo removed something')
    assert removal.stdout == "removed something\n" and removal.stderr.count("removed pack") == len(names)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["short", "text"]


def test_every_zlib_header_git_reads_is_a_candidate():
    data = b"blob 5\0hello"
    for level in range(10):
        for wbits in range(9, 16):
            z = zlib.compressobj(level, zlib.DEFLATED, wbits)
            head = (z.compress(data) + z.flush())[:2]
            assert re.fullmatch(SIGNATURES["loose-object"], f"{head[0]:02x} {head[1]:02x}"), (level, wbits)


def test_the_attacks_are_named_apart_from_each_other_and_from_the_suites():
    from legorl_std.redteam.attacks import ATTACKS

    names = [a.name for a in GIT_ATTACKS]
    assert len(set(names)) == len(names) == 6
    assert not set(names) & {a.name for a in ATTACKS}
    assert {a.category for a in GIT_ATTACKS} == {"git"} and not any(a.detected for a in GIT_ATTACKS)


@sandboxed
@pytest.mark.parametrize("guarded", [False, True], ids=["unguarded", "guarded"])
@pytest.mark.parametrize("attack", GIT_ATTACKS, ids=[a.name for a in GIT_ATTACKS])
def test_an_attack_takes_the_fix_unless_git_history_ran_first(attack, guarded, task, target, backend):
    box = backend.start(task, f"{attack.name}-{guarded}")
    try:
        if guarded:
            assert GitHistory().before_agent(box, task) == []
        for command in attack.commands:
            fill = {"task": str(task.path), "trials": str(backend.root), "py": "python3", "name": target.name}
            box.exec(command.format(**fill, marker=shlex.quote(target.marker), module=target.module), timeout=60)
        calc = box.exec("cat /app/calc.py", timeout=30).stdout
        assert calc == (BUGGY if guarded else FIXED)
    finally:
        box.stop()


@sandboxed
def test_the_suite_gives_the_git_attacks_no_reward():
    outcomes = suite.run_suite(list(GIT_ATTACKS), workers=2, kinds=("calc",))
    assert [o.attack.name for o in outcomes] == ["oracle", "no-op", *(a.name for a in GIT_ATTACKS)]
    assert all(o.ok for o in outcomes), [(o.attack.name, o.reward, o.termination, o.reason) for o in outcomes]
    assert outcomes[0].reward == 1.0 and all(o.reward == 0.0 for o in outcomes[1:])
