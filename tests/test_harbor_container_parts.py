"""The parts of the harbor sandbox's container path that need no container: the Compose
overlay, the stderr-apart wrapper (run by this host's bash), the task's own paths from its
Dockerfile, and the paths a before-agent check removed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from legorl_harbor.container import STDERR_APART, SYSTEM_PATH, _topmost, compose_overlay
from legorl_std.sandbox.dockerfile import own_paths
from legorl_std.sandbox.limits import Limits


def test_the_overlay_has_no_network_the_relaying_init_and_the_limits(tmp_path: Path) -> None:
    limits = Limits(cpu_seconds=30, nproc=96, file_size_mb=64, open_files=1024)
    main = json.loads(compose_overlay(tmp_path / "o.json", limits, 256).read_text())["services"]["main"]
    assert main["network_mode"] == "none" and main["build"] == {"network": "none"}
    assert main["command"][-2:] == ["/run/legorl/init.py", "18080"]
    assert main["pids_limit"] == 96 and main["storage_opt"] == {"size": "256M"}
    assert main["ulimits"]["fsize"] == {"soft": 64 << 20, "hard": 64 << 20}
    assert main["ulimits"]["cpu"]["hard"] > main["ulimits"]["cpu"]["soft"] == 30
    bare = json.loads(compose_overlay(tmp_path / "b.json", None, None).read_text())["services"]["main"]
    assert "pids_limit" not in bare and "storage_opt" not in bare and "ulimits" not in bare


def run_apart(command: str, mark: str = "@@m") -> subprocess.CompletedProcess[str]:
    script = STDERR_APART.format(mark=mark, path="/nonexistent", command=command, system=SYSTEM_PATH)
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)


def test_stderr_comes_apart_after_the_mark_with_the_commands_exit_code_and_path() -> None:
    done = run_apart('printf out; echo "$PATH" >&2; exit 3')
    assert done.returncode == 3 and done.stderr == ""
    out, found, err = done.stdout.rpartition("\n@@m\n")
    assert (out, found, err) == ("out", "\n@@m\n", "/nonexistent\n")


def test_a_command_that_replaces_the_trap_keeps_its_output() -> None:
    done = run_apart("trap 'echo mine' EXIT; echo out")
    assert done.stdout == "out\nmine\n" and "@@m" not in done.stdout


def test_own_paths_are_the_last_stages_workdirs_and_copy_targets() -> None:
    text = (
        "FROM a AS build\nCOPY x /build/\nFROM legorl/base\nWORKDIR /testbed\nCOPY testbed/ /testbed/\n"
        'COPY backup.git/ /opt/backup.git/\nADD ["a b", "rel/"]\nCOPY --chown=1:1 c $HOME/c\n'
    )
    assert own_paths(text) == ["/opt/backup.git", "/testbed", "/testbed/rel"]


def test_topmost_drops_what_lies_under_another() -> None:
    assert _topmost({"/opt/a", "/opt/a/b", "/opt/ab", "/x/y/z"}) == ["/opt/a", "/opt/ab", "/x/y/z"]


def test_the_container_init_reads_its_cgroups_counters_v2_or_v1(tmp_path: Path, monkeypatch) -> None:
    from legorl_std.sandbox import container_init

    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n")
    (tmp_path / "pids").mkdir()
    (tmp_path / "pids" / "pids.events").write_text("max 17\n")
    monkeypatch.setattr(container_init, "COUNTERS", (
        ("memory_mb", (str(tmp_path / "memory.events"), str(tmp_path / "memory.oom_control")), "oom_kill"),
        ("nproc", (str(tmp_path / "pids.events"), str(tmp_path / "pids" / "pids.events")), "max"),
        ("absent", (str(tmp_path / "nothing"),), "x"),
    ))
    assert container_init.counters() == b"memory_mb 2\nnproc 17\n"
