"""The `harbor` sandbox (legorl-harbor) and its Docker-free bubblewrap Harbor environment."""

import asyncio
from pathlib import Path

import pytest
from harbor.models.trial.config import (
    AgentConfig,
    EnvironmentConfig,
    TaskConfig,
    TrialConfig,
)
from harbor.trial.trial import Trial
from legorl_harbor.backend import HarborSandboxBackend
from legorl_harbor.sandbox import BWRAP, HarborSandboxOptions

from lego_rl.registry import BuildContext
from lego_rl.testing.contracts.base import conformance_tasks_dir

# The sandbox contracts on `harbor` (default environment: bubblewrap) run in test_conformance.py.


def _harbor_trial(agent: str, trials_dir: Path) -> dict[str, float] | None:
    config = TrialConfig(
        task=TaskConfig(path=conformance_tasks_dir() / "fix-add"),
        trials_dir=trials_dir,
        agent=AgentConfig(name=agent),
        environment=EnvironmentConfig(import_path=BWRAP),
    )

    async def run():
        return await (await Trial.create(config)).run()

    result = asyncio.run(run())
    assert result.exception_info is None, result.exception_info
    return result.verifier_result.rewards if result.verifier_result else None


@pytest.mark.slow
@pytest.mark.parametrize(("agent", "reward"), [("oracle", 1.0), ("nop", 0.0)])
def test_harbor_trial_on_bubblewrap(agent, reward, tmp_path, monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    assert _harbor_trial(agent, tmp_path) == {"reward": reward}


def test_unusable_environment_is_a_preflight_problem(tmp_path):
    options = HarborSandboxOptions.model_validate({"environment": {"import_path": "no_such_module:Env"}})
    found = HarborSandboxBackend(options, BuildContext(run_dir=tmp_path)).preflight()
    assert len(found) == 1 and found[0].fatal and "no_such_module" in found[0].message


def test_endpoint_maps_loopback_to_host_address(tmp_path):
    from legorl_harbor.sandbox import HarborSandbox

    class Remote:  # an environment that maps no URLs itself (as Docker, Modal, ...)
        session_id = "t"

    options = HarborSandboxOptions(host_address="host.docker.internal")
    sandbox = HarborSandbox(Remote(), None, "/app", options)  # type: ignore[arg-type]
    assert sandbox.endpoint_url("http://127.0.0.1:8123/s/x") == "http://host.docker.internal:8123/s/x"
    assert sandbox.endpoint_url("http://proxy.internal:80/s/x") == "http://proxy.internal:80/s/x"


def _lego_trial(tmp_path: Path, commands: list[str]):
    from legorl_std.dialects.openai_chat import OpenAIChatDialect
    from legorl_std.harness.scripted import ScriptedHarness
    from legorl_std.tasks.harbor_dir import load_task
    from legorl_std.verifier.test_script import ScriptVerifier

    from lego_rl.data import Sampling
    from lego_rl.engine.trial import TrialRunner, TrialSetup
    from lego_rl.proxy.server import ProxyServer
    from lego_rl.testing.scripted_inference import ScriptedInference
    from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

    backend = HarborSandboxBackend(HarborSandboxOptions(), BuildContext(run_dir=tmp_path / "run"))
    proxy = ProxyServer(
        ScriptedInference(tiny_chat_tokenizer(), []), {"openai-chat": OpenAIChatDialect()}, model_name="policy"
    )
    proxy.start()
    try:
        setup = TrialSetup(
            sandbox=backend, harness=ScriptedHarness(commands), verifier=ScriptVerifier(), proxy=proxy,
            dialect="openai-chat", model_name="policy", sampling=Sampling(),
        )  # fmt: skip
        return TrialRunner(setup).run(load_task(conformance_tasks_dir() / "fix-add"), "lego-trial")
    finally:
        proxy.stop()


@pytest.mark.slow
@pytest.mark.parametrize(("commands", "reward"), [(["sed -i 's/a - b/a + b/' calc.py"], 1.0), ([], 0.0)])
def test_lego_trial_on_harbor_sandbox(commands, reward, tmp_path):
    result = _lego_trial(tmp_path, commands)
    assert (result.termination.value, result.reward) == ("completed", reward), result.reason
    assert "agent_diff" in result.verifier  # the bubblewrap environment's verify phase ran


@pytest.mark.slow
def test_codex_through_the_proxy_on_the_harbor_sandbox(tmp_path):
    """A real harness (the Codex CLI) on a Harbor environment, every model call through the
    proxy: the scripted policy's fix, as Codex's own tool call, earns reward 1."""
    from lego_rl.engine.scripted import scripted_trial
    from lego_rl.registry import default_registry
    from lego_rl.testing.contracts.base import ContractEnv

    env = ContractEnv(tmp=tmp_path, registry=default_registry())
    env.model = env.model.model_copy(update={"max_context": 32768})
    ctx = env.build_context()
    harness = env.registry.build("harness", "codex", None, ctx)
    turns = harness.conformance_script(["sed -i 's/a - b/a + b/' calc.py"])
    result, calls = scripted_trial(
        harness=harness,
        sandbox=HarborSandboxBackend(HarborSandboxOptions(), ctx),
        verifier=env.registry.build("verifier", "test-script", None, ctx),
        inference=env.registry.build("inference", "scripted", {"turns": turns, "device": "cpu"}, ctx),
        dialect=env.registry.build("dialect", harness.dialect, None, ctx),
        model=env.model,
        task=env.task("fix-add"),
        trial_id="codex-on-harbor",
        turns=len(turns),
    )
    assert (result.termination.value, result.reward) == ("completed", 1.0), result.reason
    assert len(calls) >= 2 and all(c.error is None and c.completion_ids for c in calls)
    assert "agent_diff" in result.verifier  # graded by the Harbor environment's verify phase
