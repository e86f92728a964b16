"""Every shipped real-repository task (tasks/pypi-bugs) in containers: ``legorl check-tasks`` on
the headline container spec runs each task's oracle (upstream's fix) and the no-op through the
docker sandbox (images built offline on lego-rl's base, no network), the six anti-cheat
policies and the swe-bench verifier: the oracle earns 1, doing nothing 0, on every task."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow(minutes=8)  # 245-582 s beside the other tests on 2 cores (limit: the slow-test 1800 s)

REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "specs" / "claude-code-docker-local.yaml"
LEGORL = str(Path(sys.executable).parent / "legorl")


def test_every_real_repository_task_rewards_its_fix_and_not_the_untouched_repository(tmp_path: Path, docker_host: str) -> None:
    proc = subprocess.run(
        [LEGORL, "check-tasks", str(SPEC), f"sandbox.options.host={docker_host}", "--dir", str(tmp_path / "check")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0 and summary["broken"] == [], proc.stdout[-4000:] + proc.stderr[-4000:]
    shipped = [d for d in (REPO / "tasks" / "pypi-bugs").iterdir() if (d / "bug.toml").is_file()]
    assert summary["tasks"] == summary["ok"] == len(shipped) >= 10
    record = json.loads((tmp_path / "check" / "trials" / f"check-{shipped[0].name}-oracle" / "sandbox.json").read_text())
    assert record["network"] == "none" and record["workdir"] == "/testbed"
