"""``legorl check-tasks``: each task's oracle earns 1 and doing nothing 0 through the spec's own
sandbox, anti-cheat policies and verifier; a task that breaks either is named, exit 1."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "specs" / "mini-swe-agent-local.yaml"
LEGORL = str(Path(sys.executable).parent / "legorl")

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def check(tmp_path: Path, tasks: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    proc = subprocess.run(
        [LEGORL, "check-tasks", str(SPEC), f"tasks.options.path={tasks}", "--dir", str(tmp_path / "check"), *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return proc, json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_shipped_quickstart_tasks_pass(tmp_path: Path):
    proc, summary = check(tmp_path, REPO / "tasks" / "quickstart", "--include", "fix-a*", "--include", "fix-s*")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary == {"tasks": 2, "ok": 2, "broken": [], "trials": str(tmp_path / "check")}
    assert sorted(p.name for p in (tmp_path / "check" / "trials").glob("check-*")) == [
        f"check-{t}-{role}" for t in ("fix-average", "fix-square") for role in ("noop", "oracle")
    ]


def test_a_task_whose_oracle_fails_or_whose_no_op_passes_is_named(tmp_path: Path):
    tasks = tmp_path / "tasks"
    for name in ("fix-average", "fix-square"):
        shutil.copytree(REPO / "tasks" / "quickstart" / name, tasks / name)
    (tasks / "fix-average" / "solution" / "solve.sh").write_text("#!/bin/bash\ntrue\n")  # fixes nothing
    powers = tasks / "fix-square" / "environment" / "app" / "powers.py"
    powers.write_text(powers.read_text().replace("power(2, x)", "power(x, 2)"))  # starts fixed: doing nothing passes
    proc, summary = check(tmp_path, tasks)
    assert proc.returncode == 1 and summary["broken"] == ["fix-average", "fix-square"], proc.stdout
    assert "fix-average\n    the oracle earned 0 (completed)" in proc.stdout
    assert "fix-square\n    doing nothing earned 1 (completed)" in proc.stdout
