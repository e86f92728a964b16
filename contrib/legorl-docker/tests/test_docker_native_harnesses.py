"""Claude Code and Codex, their real unmodified native CLIs (the pinned npm packages that
scripts/setup.sh installs), each in a container of the docker sandbox: the binaries shown
read-only at their own paths through ProvidesFiles, the proxy reached only through the trial's
unix socket (the container has no network), driven by the ``scripted`` policy as the harness
contracts drive them, with the anti-cheat policies of the headline spec on."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lego_rl.data import Attribution, Termination
from lego_rl.engine.scripted import scripted_trial
from lego_rl.kinds import Task, first_fatal
from lego_rl.registry import default_registry
from lego_rl.testing.contracts import CONFORMANCE_COMMANDS, HARNESS_CONTEXT
from lego_rl.testing.contracts.base import ContractEnv

pytestmark = pytest.mark.slow

ANTICHEAT = ("no-network", "git-history", "test-guard", "reward-guard", "process-reaper", "reward-hacking")
"""The headline spec's (specs/claude-code-swe.yaml) policies."""


class Capturing:
    """A sandbox backend, keeping the sandboxes it started (to look at after the trial)."""

    def __init__(self, backend: Any):
        self.backend = backend
        self.started: list[Any] = []

    def preflight(self) -> list[Any]:
        return self.backend.preflight()

    def start(self, task: Task, trial_id: str) -> Any:
        self.started.append(self.backend.start(task, trial_id))
        return self.started[-1]


def native_trial(
    tmp_path: Path,
    name: str,
    commands: list[str],
    trial_id: str,
    task: Task | None = None,
    sandbox: tuple[str, dict[str, Any] | None] = ("docker", None),
) -> tuple[Any, list[Any], Capturing, Any]:
    """One trial of harness ``name`` in ``sandbox`` (plugin, options); (result, calls, backend, harness)."""
    registry = default_registry()
    env = ContractEnv(tmp_path, registry)
    env = replace(env, model=env.model.model_copy(update={"max_context": HARNESS_CONTEXT}))
    ctx = env.build_context()
    harness = registry.build("harness", name, None, ctx)
    if (problem := first_fatal(harness.preflight())) is not None:
        pytest.skip(f"{name} is not installed here: {problem.message} ({problem.fix})")
    turns = harness.conformance_script(list(commands))
    backend = Capturing(registry.build("sandbox", *sandbox, ctx))
    result, calls = scripted_trial(
        harness=harness,
        sandbox=backend,
        verifier=registry.build("verifier", "test-script", None, ctx),
        inference=registry.build("inference", "scripted", {"turns": turns, "device": "cpu"}, ctx),
        dialect=registry.build("dialect", harness.dialect, None, ctx),
        model=env.model,
        task=task or env.task("fix-add"),
        trial_id=trial_id,
        turns=len(turns),
        anticheat=[registry.build("anticheat", p, None, ctx) for p in ANTICHEAT],
    )
    return result, calls, backend, harness


@pytest.mark.parametrize("name", ["claude-code", "codex"])
@pytest.mark.parametrize(
    ("commands", "reward"), [(CONFORMANCE_COMMANDS, 1.0), ([], 0.0)], ids=["solves", "does-nothing"]
)
def test_a_native_cli_runs_in_the_container_against_the_proxy(
    tmp_path: Path, name: str, commands: list[str], reward: float
) -> None:
    trial_id = f"docker-{name}-{int(reward)}"
    result, calls, backend, harness = native_trial(tmp_path, name, commands, trial_id)
    transcript = result.harness.get("transcript", "")[-3000:]
    assert (result.termination, result.attribution) == (Termination.COMPLETED, Attribution.NONE), (
        result.reason,
        transcript,
    )
    assert result.reward == reward, (result.verifier, transcript)
    assert result.calls == len(calls) >= len(commands) + 1
    sampled = sum(len(c.completion_ids) for c in calls if c.error is None)
    assert result.trajectory is not None and result.trajectory.trained_tokens == sampled > 0
    if commands:
        assert result.verifier["crossing"]["crossed_paths"] == ["M /app/calc.py"], result.verifier["crossing"]
    sandbox = backend.started[0]
    cli = harness.command_path()
    assert cli is not None and any(cli.is_relative_to(p) for p in sandbox.bound), "the CLI ran from a bind, not a copy"
    assert not sandbox._state.exists(), "the trial's state dir (its socket) is left"
