"""Resume: a re-run into the same run directory continues its checkpoint when the spec matches."""

from __future__ import annotations

from pathlib import Path

import yaml

from lego_rl.engine.resume import choose_run_dir, restarts
from lego_rl.kinds import Event
from lego_rl.observe.store import RunStore
from lego_rl.spec.models import Spec

SPEC = {
    "model": {"name": "m"},
    "tasks": {"plugin": "harbor-dir"},
    "sandbox": {"plugin": "local"},
    "harness": {"plugin": "scripted"},
    "dialect": {"plugin": "openai-chat"},
    "verifier": {"plugin": "test-script"},
    "optimizer": {"plugin": "grpo"},
    "inference": {"plugin": "hf"},
    "trainer": {"plugin": "embedded"},
}


def spec(tmp_path: Path, **run) -> Spec:
    return Spec.model_validate({**SPEC, "run": {"output_dir": str(tmp_path), "name": "r", **run}})


def earlier_run(tmp_path: Path, s: Spec, checkpoint: bool = True) -> Path:
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "spec.yaml").write_text(yaml.safe_dump(s.model_dump(mode="json")))
    (run_dir / "store.sqlite").write_text("")
    if checkpoint:
        state = run_dir / "checkpoints" / "state-000001"
        state.mkdir(parents=True)
        (state / "engine.json").write_text("{}")
        (run_dir / "checkpoints" / "last").symlink_to(state.name)
    return run_dir


def test_fresh_directory_when_unused(tmp_path: Path) -> None:
    chosen = choose_run_dir(spec(tmp_path))
    assert chosen.path == (tmp_path / "r").resolve() and chosen.resume_from is None


def test_resumes_a_matching_checkpoint_even_with_more_steps(tmp_path: Path) -> None:
    run_dir = earlier_run(tmp_path, spec(tmp_path, steps=2))
    chosen = choose_run_dir(spec(tmp_path, steps=5))
    assert chosen.path == run_dir.resolve()
    assert chosen.resume_from == run_dir.resolve() / "checkpoints" / "last"
    assert "resuming" in chosen.note


def test_never_resumes_another_spec_or_without_checkpoint_or_when_off(tmp_path: Path) -> None:
    earlier_run(tmp_path, spec(tmp_path, group_size=4))
    chosen = choose_run_dir(spec(tmp_path))
    assert chosen.path.name == "r-2" and chosen.resume_from is None
    assert "different spec" in chosen.note
    chosen = choose_run_dir(spec(tmp_path, group_size=4, resume=False))
    assert chosen.path.name == "r-2" and "resume is off" in chosen.note


def test_a_run_without_checkpoint_is_not_overwritten(tmp_path: Path) -> None:
    earlier_run(tmp_path, spec(tmp_path), checkpoint=False)
    chosen = choose_run_dir(spec(tmp_path))
    assert chosen.path.name == "r-2" and "without a checkpoint" in chosen.note


def test_restarts_count_the_earlier_starts_of_the_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    assert restarts(run_dir) == 0  # no store yet
    store = RunStore(run_dir)
    for n in range(3):
        store.emit(Event("run_start", {}, float(n)))
        assert restarts(run_dir) == n
