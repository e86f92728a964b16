"""`legorl apply` on the quickstart spec, end to end: real harness, proxy, sandbox, verifier, trainer."""

from pathlib import Path

import pytest

from lego_rl.observe.store import read_steps, read_trials
from lego_rl.testing.runs import apply_spec, trained_tokens_sampled

# The module's real run has a limit of its own (900 s): the test's is above it (the
# default per-test timeout is 600 s).
pytestmark = pytest.mark.timeout(1200)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return apply_spec(
        ROOT / "specs" / "mini-swe-agent-local.yaml",
        tmp_path_factory.mktemp("runs"),
        "run.steps=2",
        "run.tasks_per_step=1",
        "run.group_size=2",
        "run.max_turns=2",
        "run.max_tokens=24",
    )


@pytest.mark.slow(minutes=3)
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
    assert trained_tokens_sampled(run_dir) > 0
