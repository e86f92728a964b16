"""Every first-party harness driven by the embedded policy itself, not a script: `legorl apply`
on its example spec samples from the tiny policy through the unmodified harness, trains a step
on exactly the sampled tokens, and the next step's calls sample from the updated weights.
(Codex runs in the quickstart's tests, mini-swe-agent in test_apply_e2e.)"""

from pathlib import Path

import pytest

from lego_rl.testing.runs import apply_spec, check_training_run

pytestmark = [pytest.mark.slow(minutes=5), pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("harness", ["claude-code", "openhands"])
def test_the_policy_drives_the_harness_and_trains_on_what_it_sampled(harness: str, tmp_path: Path) -> None:
    run_dir = apply_spec(
        ROOT / "specs" / f"{harness}-local.yaml",
        tmp_path,
        "run.steps=2",
        "run.tasks_per_step=1",
        "run.group_size=2",
        "run.max_turns=2",
        "run.max_tokens=24",
        name=harness,
    )
    check_training_run(run_dir, steps=2, trials_per_step=2)
