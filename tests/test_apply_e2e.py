"""`legorl apply` on the quickstart spec, end to end: real harness, proxy, sandbox, verifier, trainer."""

import subprocess
import sys
from pathlib import Path

import pytest

from lego_rl.observe.store import read_calls, read_steps, read_trajectory, read_trials

# The module's real run has a limit of its own (900 s): the test's is above it (the
# default per-test timeout is 600 s).
pytestmark = pytest.mark.timeout(1200)

ROOT = Path(__file__).resolve().parents[1]
LEGORL = [str(Path(sys.executable).parent / "legorl")]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs")
    proc = subprocess.run(
        [
            *LEGORL,
            "apply",
            str(ROOT / "specs" / "mini-swe-agent-local.yaml"),
            f"run.output_dir={out}",
            "run.name=e2e",
            "run.steps=2",
            "run.tasks_per_step=1",
            "run.group_size=2",
            "run.max_turns=2",
            "run.max_tokens=24",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    (out / "e2e" / "apply.log").write_text(proc.stdout)
    return out / "e2e"


@pytest.mark.slow
def test_apply_writes_store_checkpoint_and_step_lines(run_dir: Path) -> None:
    steps = read_steps(run_dir)
    assert [s["step"] for s in steps] == [0, 1]
    for s in steps:
        assert "loss" in s and "reward_mean" in s
    log = (run_dir / "apply.log").read_text()
    assert log.count("step 1/2") == 1 and log.count("step 2/2") == 1
    ckpt = run_dir / "checkpoints" / "final"
    assert (ckpt / "config.json").is_file()
    assert any(ckpt.glob("*.safetensors"))


@pytest.mark.slow
def test_every_trial_records_a_reason_and_calls(run_dir: Path) -> None:
    trials = read_trials(run_dir)
    assert len(trials) == 4
    for t in trials:
        assert t["termination"], t
        assert t["reward"] in (0.0, 1.0)
        assert t["calls"] >= 1, f"harness never reached the proxy: {t['reason']}"


@pytest.mark.slow
def test_trained_positions_hold_exactly_the_sampled_tokens(run_dir: Path) -> None:
    """Every mask-1 token of every trajectory is a token the backend sampled, with its log-prob."""
    checked = 0
    for t in read_trials(run_dir):
        traj = read_trajectory(run_dir, t["trial_id"])
        assert traj is not None, t["trial_id"]
        trained = [
            (tok, lp)
            for seg in traj.segments
            for tok, m, lp in zip(seg.ids, seg.loss_mask, seg.logprobs, strict=True)
            if m
        ]
        sampled = [
            pair
            for rec in read_calls(run_dir, t["trial_id"])
            if rec.index not in traj.rolled_back and not rec.error
            for pair in zip(rec.completion_ids, rec.logprobs, strict=True)
        ]
        assert trained == sampled
        checked += len(trained)
    assert checked > 0
