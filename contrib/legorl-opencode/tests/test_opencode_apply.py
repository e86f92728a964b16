"""OpenCode driven by the embedded policy itself: `legorl apply` on this distribution's example
spec samples from the tiny policy through the unmodified OpenCode CLI, trains two steps on
exactly the sampled tokens, the second sampling from the weights the first trained."""

from pathlib import Path

import pytest

from lego_rl.testing.runs import apply_spec, check_training_run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

SPEC = Path(__file__).resolve().parents[1] / "specs" / "opencode-local.yaml"


def test_the_policy_drives_opencode_and_trains_on_what_it_sampled(tmp_path: Path) -> None:
    overrides = ["run.steps=2", "run.tasks_per_step=1", "run.group_size=2", "run.max_turns=2", "run.max_tokens=24"]
    run_dir = apply_spec(SPEC, tmp_path, *overrides, name="opencode")
    check_training_run(run_dir, steps=2, trials_per_step=2)
