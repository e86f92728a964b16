"""One wiring of trials (lego_rl.engine.wiring): the spec's model and limits reach the proxy and
the runner, and nothing else in the core or the first-party plugins assembles them itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from legorl_std.dialects.openai_chat import OpenAIChatDialect

from lego_rl.data import Sampling
from lego_rl.engine.no_inference import ModelCalled, NoInference
from lego_rl.engine.wiring import TrialLimits, TrialWiring
from lego_rl.spec.models import ModelSpec, RunSpec
from lego_rl.testing.scripted_inference import ScriptedInference
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

ROOT = Path(__file__).resolve().parents[1]


def test_limits_of_a_run_are_its_sampling_and_turns_with_two_to_spare():
    limits = TrialLimits.of_run(RunSpec(temperature=0.7, max_tokens=321, max_turns=5))
    assert limits == TrialLimits(Sampling(temperature=0.7, max_tokens=321), 7)


def test_the_runner_talks_through_the_wired_proxy_for_the_model():
    dialect = OpenAIChatDialect()
    model = ModelSpec(name="policy-x", max_context=4096)
    wiring = TrialWiring(ScriptedInference(tiny_chat_tokenizer(), []), "openai-chat", dialect, model)
    limits = TrialLimits(Sampling(max_tokens=9), 3)
    runner = wiring.runner(sandbox=object(), harness=object(), verifier=object(), limits=limits)  # type: ignore[arg-type]
    setup = runner.setup
    assert (setup.proxy, setup.dialect, setup.model_name) == (wiring.proxy, "openai-chat", "policy-x")
    assert (setup.sampling, setup.max_calls, setup.anticheat) == (limits.sampling, 3, [])
    assert wiring.proxy.model_name == "policy-x" and wiring.proxy.dialects == {"openai-chat": dialect}


def test_a_wiring_without_model_refuses_a_call_to_it():
    import openai

    wiring = TrialWiring.without_model("openai-chat", OpenAIChatDialect())
    assert isinstance(wiring.proxy.handler.inference, NoInference) and wiring.model_name == "policy"
    with pytest.raises(ModelCalled, match="harness is scripted"):
        wiring.proxy.handler.inference.generate([1, 2, 3], Sampling())
    with wiring.serving():
        session = wiring.proxy.open_session("trial-1", "openai-chat", sampling=Sampling(max_tokens=8))
        client = openai.OpenAI(base_url=session.base_url(wiring.proxy.url) + "/v1", api_key=session.api_key, max_retries=0)
        with pytest.raises(openai.APIStatusError) as exc:
            client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "hi"}])
    assert exc.value.status_code >= 500 and "harness is scripted" in str(exc.value)


def test_no_other_module_assembles_a_trial_setup():
    sources = [*ROOT.glob("lego_rl/**/*.py"), *ROOT.glob("plugins/*/legorl_*/**/*.py")]
    assembling = {
        str(p.relative_to(ROOT)) for p in sources if re.search(r"\bTrialSetup\(", p.read_text())
    }
    assert assembling == {"lego_rl/engine/wiring.py"}
