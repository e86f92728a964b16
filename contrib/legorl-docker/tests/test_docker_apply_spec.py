"""``legorl apply specs/claude-code-docker-local.yaml`` end to end on this machine's daemon: two
GRPO steps of the tiny policy through the unmodified Claude Code CLI in containers (no network,
the six anti-cheat policies on), the quickstart tasks' images built offline; every trial ends
as the policy's doing (the untrained policy may run out of turns or tokens: no
infrastructure failure), reached the proxy, and leaves no container of the run behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from legorl_docker.cli import Docker

from lego_rl.data import POLICY_TERMINATIONS
from lego_rl.observe.store import read_steps, read_trials

pytestmark = pytest.mark.slow(minutes=6)

REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "specs" / "claude-code-docker-local.yaml"
LEGORL = str(Path(sys.executable).parent / "legorl")


def test_two_grpo_steps_of_claude_code_in_containers(tmp_path: Path, docker_host: str) -> None:
    proc = subprocess.run(
        [LEGORL, "apply", str(SPEC), f"run.output_dir={tmp_path}", "run.name=docker", f"sandbox.options.host={docker_host}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    run_dir = tmp_path / "docker"
    steps = read_steps(run_dir)
    assert [s["step"] for s in steps] == [0, 1] and all("loss" in s for s in steps), steps
    trials = read_trials(run_dir)
    assert len(trials) == 4
    for t in trials:
        assert t["termination"] in POLICY_TERMINATIONS, (t["termination"], t["reason"])  # the untrained policy's doing
        assert t["reward"] in (0.0, 1.0) and t["calls"] >= 1, t
    record = (run_dir / "trials" / trials[0]["trial_id"] / "sandbox.json").read_text()
    assert '"network": "none"' in record
    left = Docker(docker_host).text("ps", "-a", "--filter", "label=legorl.trial", "--format", "{{.Names}}")
    assert not [n for n in left.split() if any(t["trial_id"] in n for t in trials)], left
    print({s["step"]: round(s.get("seconds", 0.0), 1) for s in steps}, [(t["termination"], t["reward"], t["calls"]) for t in trials])
