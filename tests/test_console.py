"""What the CLI and the run engine print to a file or pipe stays whole: no line is wrapped
(Rich's default is 80 columns) inside a path or between the fields of a step line.

The paths here are made long on purpose (over 200 characters below ``tmp_path``, whatever
its own length), so a wrapped line cannot go unnoticed, and hold ``[bold]``, which a path
printed as Rich markup would lose.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.table import Table

from lego_rl.console import make_console

ROOT = Path(__file__).resolve().parents[1]
LEGORL = str(Path(sys.executable).parent / "legorl")


def deep(tmp_path: Path) -> Path:
    """A directory whose path is more than 200 characters longer than ``tmp_path``."""
    path = tmp_path.joinpath("a" * 70, "[bold]" + "b" * 70, "c" * 70)
    path.mkdir(parents=True)
    return path


def legorl(*args: str) -> list[str]:
    """Lines ``legorl ARGS`` wrote to its stdout, a pipe (stderr kept apart: a library's
    progress bar there must not interleave with what is checked)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    proc = subprocess.run(
        [LEGORL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout.splitlines()


def test_plan_to_a_pipe_keeps_a_long_spec_path_on_its_line(tmp_path: Path) -> None:
    spec = deep(tmp_path) / "spec.yaml"
    text = (ROOT / "specs" / "mini-swe-agent-local.yaml").read_text()
    spec.write_text(text.replace("../tasks/", f"{ROOT / 'tasks'}/"))
    lines = legorl("plan", str(spec))
    assert f"Plan of {spec}" in lines, lines[:3]


@pytest.mark.slow
def test_apply_to_a_pipe_keeps_step_and_path_lines_whole(tmp_path: Path) -> None:
    """A real run (one step of one trial, a scripted harness, the tiny policy trained)."""
    out = deep(tmp_path)
    spec = str(ROOT / "specs" / "mini-swe-agent-local.yaml")
    lines = legorl(
        "apply", spec, f"run.output_dir={out}", "run.name=pipe", "run.steps=1",
        "run.tasks_per_step=1", "run.group_size=1", "run.concurrency=1",
        "harness.plugin=scripted", 'harness.options.commands=["true"]',
    )  # fmt: skip
    run_dir = out / "pipe"
    step = re.compile(r"step 1/1  reward \S+  loss \S+  informative 0/1  tokens \d+  .* \(rollout \S+s\)")
    assert [line for line in lines if step.fullmatch(line.split("  (no informative")[0])], lines
    assert f"checkpoint {run_dir}/checkpoints/final" in lines, lines
    assert f"report: {run_dir}/report" in lines, lines
    assert any(re.fullmatch(rf"run finished in \d+s: {re.escape(str(run_dir))}", x) for x in lines)
    assert f"✓ run finished: {run_dir}" in lines, lines


def wide_table() -> Table:
    table = Table("name", "path")
    table.add_row("run", "/runs/" + "x" * 150)
    return table


def test_a_console_on_a_file_wraps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")  # a terminal's width does not apply to a file
    with (tmp_path / "log").open("w+") as file:
        monkeypatch.setattr(sys, "stdout", file)
        make_console().print(wide_table(), "a line of " + "words " * 40)
        file.seek(0)
        lines = file.read().splitlines()
    assert any("/runs/" + "x" * 150 in line for line in lines), lines
    assert lines[-1] == "a line of " + "words " * 40


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_a_console_on_a_terminal_fits_tables_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    leader, follower = os.openpty()
    try:
        with open(follower, "w", closefd=False) as tty:
            monkeypatch.setattr(sys, "stdout", tty)
            make_console().print(wide_table())
        written = os.read(leader, 1 << 16).decode()
    finally:
        os.close(leader)
        os.close(follower)
    rows = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in written.splitlines()]
    assert "name" in rows[1] and all(len(row) <= 40 for row in rows), rows
