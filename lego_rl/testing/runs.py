"""End-to-end checks for plugin authors: run ``legorl apply`` on a spec and check what the run
trained, from its store (the same check for every harness, dialect and trainer)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lego_rl.observe.store import read_calls, read_steps, read_trajectory, read_trials

LEGORL = str(Path(sys.executable).parent / "legorl")


def apply_spec(spec: Path, out: Path, *overrides: str, name: str = "e2e", timeout: float = 900) -> Path:
    """``legorl apply spec run.output_dir=out run.name=name *overrides`` in a fresh process; the
    run directory, with the command's output in ``apply.log``. Fails with the output's tail
    when the command fails."""
    proc = subprocess.run(
        [LEGORL, "apply", str(spec), f"run.output_dir={out}", f"run.name={name}", *overrides],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"legorl apply {spec} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    run_dir = out / name
    (run_dir / "apply.log").write_text(proc.stdout)
    return run_dir


def trained_tokens_sampled(run_dir: Path) -> int:
    """Check that every trained (mask-1) token of every trial's trajectory is, in order, a
    token the inference backend sampled in one of the trial's calls, with its log-prob; the
    number of tokens checked."""
    checked = 0
    for trial in read_trials(run_dir):
        trajectory = read_trajectory(run_dir, trial["trial_id"])
        if trajectory is None:
            continue
        trained = [
            (token, logprob)
            for segment in trajectory.segments
            for token, mask, logprob in zip(segment.ids, segment.loss_mask, segment.logprobs, strict=True)
            if mask
        ]
        sampled = [
            pair
            for record in read_calls(run_dir, trial["trial_id"])
            if record.index not in trajectory.rolled_back and not record.error
            for pair in zip(record.completion_ids, record.logprobs, strict=True)
        ]
        assert trained == sampled, f"trial {trial['trial_id']}: its trained tokens are not the sampled ones"
        checked += len(trained)
    return checked


def check_training_run(run_dir: Path, steps: int, trials_per_step: int) -> None:
    """Check a finished run of ``steps`` steps: every step trained tokens, each one sampled
    (:func:`trained_tokens_sampled`), every trial reached the proxy and none failed for the
    infrastructure, and each step's calls sampled from the weights the step before it trained
    (policy version = step)."""
    found = read_steps(run_dir)
    assert [s["step"] for s in found] == list(range(steps)), found
    assert all(s["trained_tokens"] > 0 and s["trained_non_sampled_tokens"] == 0 for s in found), found
    trials = read_trials(run_dir)
    assert len(trials) == steps * trials_per_step, [t["trial_id"] for t in trials]
    assert all(t["calls"] >= 1 for t in trials), [t["reason"] for t in trials if not t["calls"]]
    infrastructure = [t["reason"] for t in trials if t["attribution"] == "infrastructure"]
    assert not infrastructure, f"trials failed for the infrastructure: {infrastructure}"
    assert trained_tokens_sampled(run_dir) == sum(s["trained_tokens"] for s in found)
    for trial in trials:
        versions = {version for version, _ in trial["call_versions"]}
        assert versions == {trial["step"]}, f"trial {trial['trial_id']} of step {trial['step']} sampled with {versions}"
