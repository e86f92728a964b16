"""A real, unmodified harness in a container: mini-swe-agent's ``mini`` CLI from this project's
venv, shown read-only at its own path through ProvidesFiles (the harness declares the venv and
the Python it links to), talking to the real proxy through the trial's unix socket (the
container has no network), driven by the ``scripted`` policy as the harness contracts drive it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from legorl_docker.sandbox import DockerSandbox

from lego_rl.data import Termination
from lego_rl.engine.scripted import scripted_trial
from lego_rl.kinds import Task, first_fatal
from lego_rl.registry import default_registry
from lego_rl.testing.contracts import CONFORMANCE_COMMANDS, HARNESS_CONTEXT
from lego_rl.testing.contracts.base import ContractEnv

pytestmark = pytest.mark.slow


class Capturing:
    def __init__(self, backend: Any):
        self.backend = backend
        self.started: list[DockerSandbox] = []

    def preflight(self) -> list[Any]:
        return self.backend.preflight()

    def start(self, task: Task, trial_id: str) -> DockerSandbox:
        self.started.append(self.backend.start(task, trial_id))
        return self.started[-1]


@pytest.mark.parametrize(("commands", "reward"), [(CONFORMANCE_COMMANDS, 1.0), ([], 0.0)], ids=["solves", "does-nothing"])
def test_mini_swe_agent_runs_in_the_container_against_the_proxy(tmp_path: Path, commands: list[str], reward: float) -> None:
    registry = default_registry()
    env = ContractEnv(tmp_path, registry)
    env = replace(env, model=env.model.model_copy(update={"max_context": HARNESS_CONTEXT}))
    ctx = env.build_context()
    harness = registry.build("harness", "mini-swe-agent", None, ctx)
    if (problem := first_fatal(harness.preflight())) is not None:
        pytest.skip(f"mini-swe-agent is not installed: {problem}")
    turns = harness.conformance_script(list(commands))
    backend = Capturing(registry.build("sandbox", "docker", None, ctx))
    result, calls = scripted_trial(
        harness=harness,
        sandbox=backend,
        verifier=registry.build("verifier", "test-script", None, ctx),
        inference=registry.build("inference", "scripted", {"turns": turns, "device": "cpu"}, ctx),
        dialect=registry.build("dialect", harness.dialect, None, ctx),
        model=env.model,
        task=env.task("fix-add"),
        trial_id=f"docker-mini-{int(reward)}",
        turns=len(turns),
    )
    assert result.termination == Termination.COMPLETED, (result.reason, result.harness.get("transcript", "")[-3000:])
    assert result.reward == reward and result.calls == len(turns) == len(calls)
    sampled = sum(len(c.completion_ids) for c in calls if c.error is None)
    assert result.trajectory is not None and result.trajectory.trained_tokens == sampled > 0
    sandbox = backend.started[0]
    mini = harness.command_path()
    assert mini is not None and any(mini.is_relative_to(p) for p in sandbox.bound), "mini ran from a bind, not a copy"
    assert not sandbox._state.exists()
