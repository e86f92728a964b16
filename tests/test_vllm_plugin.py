"""The vllm inference plugin against a small real HTTP server speaking vLLM's API (CPU).

The server (legorl_vllm.testing.FakeVLLM) samples with the embedded tiny Qwen3-MoE, so
log-probs and routed experts are a real model's; the plugin's results are compared with what
that model produces when called directly.
"""

from __future__ import annotations

import json
import math
import stat
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import yaml
from harness_fakes import NullSandboxes
from legorl_embedded.inference.hf import HFInference, HFInferenceOptions
from legorl_embedded.policy.model import build_model, save_checkpoint
from legorl_vllm.client import (
    VLLMError,
    completion_body,
    decode_routed_experts,
    encode_routed_experts,
    error_message,
)
from legorl_vllm.inference import VLLMInference
from legorl_vllm.options import VLLMOptions
from legorl_vllm.server import LaunchPlan, free_port, serve_command
from legorl_vllm.testing import FakeVLLM
from legorl_vllm.weights import MARKER, stage_model_dir, write_weights
from pydantic import ValidationError

from lego_rl.data import Sampling
from lego_rl.registry import BuildContext
from lego_rl.spec.models import ModelSpec, Spec

ROOT = Path(__file__).resolve().parents[1]
TINY = ModelSpec(name="tiny", max_context=256)
CPU = HFInferenceOptions(device="cpu", threads=1)
LAYERS, TOP_K = 2, 2  # the tiny MoE: 2 layers, top-2 routing


@pytest.fixture(scope="module")
def backend() -> HFInference:
    return HFInference(TINY, CPU, seed=0)


@pytest.fixture(scope="module")
def server(backend):
    with FakeVLLM(backend, served_name="tiny") as srv:
        yield srv


@pytest.fixture(scope="module")
def prompt(backend) -> list[int]:
    tok = backend.tokenizer
    text = tok.apply_chat_template(
        [{"role": "user", "content": "Fix the bug"}],
        add_generation_prompt=True,
        tokenize=False,
    )
    return tok.encode(text, add_special_tokens=False)


def attached(server: FakeVLLM, **options) -> VLLMInference:
    return VLLMInference(
        TINY, VLLMOptions(url=server.url, weight_sync="none", **options)
    )


# ---------------------------------------------------------------- options and command line


def test_options_accept_the_swe_spec_block_and_forbid_typos() -> None:
    spec = yaml.safe_load((ROOT / "specs" / "claude-code-swe.yaml").read_text())
    assert spec["inference"]["plugin"] == "vllm"
    opts = VLLMOptions.model_validate(spec["inference"]["options"])
    assert (opts.tensor_parallel_size, opts.enable_routing_replay) == (4, True)
    with pytest.raises(ValidationError, match="tensor_paralel_size"):
        VLLMOptions.model_validate({"tensor_paralel_size": 2})
    with pytest.raises(ValidationError, match="http"):
        VLLMOptions(url="localhost:8000")


def test_serve_command_carries_the_flags_of_faithful_sampling() -> None:
    plan = LaunchPlan(
        model="/m",
        served_name="policy",
        max_model_len=8193,
        dtype="bfloat16",
        seed=7,
        dev_mode=True,
    )
    on = serve_command(
        VLLMOptions(
            tensor_parallel_size=4,
            enable_routing_replay=True,
            extra_args=["--enforce-eager"],
        ),
        plan,
        9000,
    )
    assert on[:3] == ["vllm", "serve", "/m"]
    flags = dict(zip(on[3::2], on[4::2], strict=False))
    assert flags["--tensor-parallel-size"] == "4" and flags["--max-model-len"] == "8193"
    assert (
        flags["--logprobs-mode"] == "processed_logprobs"
        and flags["--served-model-name"] == "policy"
    )
    assert "--enable-return-routed-experts" in on and on[-1] == "--enforce-eager"
    off = serve_command(VLLMOptions(), plan, 9000)
    assert "--enable-return-routed-experts" not in off


def test_request_body_maps_our_sampling() -> None:
    body = completion_body(
        "m",
        [1, 2],
        Sampling(temperature=0.7, top_p=0.9, max_tokens=5, stop_token_ids=[9], seed=4),
        stream=True,
    )
    assert (
        body["prompt"] == [1, 2]
        and body["logprobs"] == 0
        and body["return_token_ids"] is True
    )
    assert (
        body["temperature"],
        body["top_p"],
        body["max_tokens"],
        body["stop_token_ids"],
        body["seed"],
    ) == (0.7, 0.9, 5, [9], 4)
    assert "top_k" not in body and body["stream"] is True
    assert completion_body("m", [1], Sampling(top_k=20), stream=False)["top_k"] == 20


def test_error_bodies_of_every_era_give_the_servers_message() -> None:
    new = '{"error": {"message": "bad prompt", "type": "BadRequestError", "code": 400}}'
    old = '{"object": "error", "message": "too long", "type": "BadRequestError", "code": 400}'
    assert "bad prompt" in error_message(400, new) and "too long" in error_message(
        400, old
    )
    assert "Not Found" in error_message(404, '{"detail": "Not Found"}')
    assert "gateway down" in error_message(502, "gateway down")


def test_routed_experts_payload_round_trips_and_rejects_junk() -> None:
    experts = np.arange(24, dtype=np.int32).reshape(3, 4, 2)
    assert np.array_equal(
        decode_routed_experts(encode_routed_experts(experts)), experts
    )
    with pytest.raises(VLLMError, match="base64 .npy"):
        decode_routed_experts("bm90IG5weQ==")


# ---------------------------------------------------------------- generation


def test_generation_matches_the_model_token_for_token(server, backend, prompt) -> None:
    sampling = Sampling(max_tokens=8, seed=11)
    direct = backend.generate(prompt, sampling)
    for stream in (False, True):
        seen: list[tuple[int, float]] = []
        gen = attached(server, stream=stream).generate(
            prompt, sampling, on_token=lambda t, lp, seen=seen: seen.append((t, lp))
        )
        assert gen.completion_ids == direct.completion_ids
        assert gen.logprobs == pytest.approx(direct.logprobs, abs=1e-6)
        assert seen == list(zip(gen.completion_ids, gen.logprobs, strict=True))
        assert server.requests[-1]["stream"] is stream
    assert all(lp < 0 for lp in gen.logprobs) and gen.routing is None


def test_scoring_reads_the_servers_prompt_logprobs(server, backend, prompt) -> None:
    inference = attached(server)
    gen = inference.generate(prompt, Sampling(max_tokens=6, seed=3))
    scored = inference.score(prompt, gen.completion_ids)
    assert server.requests[-1]["prompt_logprobs"] == 0
    assert scored == pytest.approx(backend.score(prompt, gen.completion_ids), abs=1e-5)
    assert scored == pytest.approx(gen.logprobs, abs=1e-4)  # what the contract checks, here exact


def test_routing_covers_every_prompt_and_completion_token(
    server, backend, prompt
) -> None:
    sampling = Sampling(max_tokens=6, seed=5)
    direct = backend.generate(prompt, sampling)
    gen = attached(server, enable_routing_replay=True).generate(prompt, sampling)
    n = len(gen.completion_ids)
    assert len(gen.routing) == n and len(gen.prompt_routing) == len(prompt)
    assert np.asarray(gen.routing).shape == (n, LAYERS, TOP_K)
    assert gen.routing == direct.routing and gen.prompt_routing == direct.prompt_routing
    extra = server.requests[-1]
    assert (
        extra["prompt"] == prompt + gen.completion_ids
        and extra["routed_experts_prompt_start"] == 0
    )
    only = attached(server, enable_routing_replay=True, prompt_routing=False).generate(
        prompt, sampling
    )
    assert only.prompt_routing is None and only.routing == direct.routing
    assert server.requests[-1]["routed_experts_prompt_start"] == len(prompt)


def test_stop_ids_and_max_tokens_end_the_generation(server, prompt) -> None:
    inf = attached(server)
    first = inf.generate(prompt, Sampling(max_tokens=3, seed=9))
    assert len(first.completion_ids) == 3 and first.finish_reason == "length"
    stopped = inf.generate(
        prompt, Sampling(max_tokens=3, seed=9, stop_token_ids=[first.completion_ids[1]])
    )
    assert (
        stopped.completion_ids == first.completion_ids[:2]
        and stopped.finish_reason == "stop"
    )


def test_routing_needs_a_server_that_returns_it(backend, prompt) -> None:
    with (
        FakeVLLM(backend, routing=False) as plain,
        pytest.raises(VLLMError, match="--enable-return-routed-experts"),
    ):
        attached(plain, enable_routing_replay=True).generate(
            prompt, Sampling(max_tokens=2)
        )


# ---------------------------------------------------------------- errors and checks


def test_server_errors_reach_the_caller_with_their_message(server, prompt) -> None:
    server.inject_error(500, "CUDA out of memory")
    with pytest.raises(VLLMError, match="CUDA out of memory"):
        attached(server, stream=False).generate(prompt, Sampling(max_tokens=2))
    server.inject_error(500, "engine dead", after_tokens=2)
    seen: list[int] = []
    with pytest.raises(VLLMError, match="engine dead"):
        attached(server).generate(
            prompt, Sampling(max_tokens=6), on_token=lambda t, lp: seen.append(t)
        )
    assert len(seen) == 2
    with pytest.raises(VLLMError, match="maximum context length"):
        attached(server).generate(prompt, Sampling(max_tokens=TINY.max_context))
    wrong = VLLMInference(
        TINY, VLLMOptions(url=server.url, served_model_name="other", weight_sync="none")
    )
    with pytest.raises(VLLMError, match="does not exist"):
        wrong.generate(prompt, Sampling(max_tokens=2))
    assert any("serves ['tiny']" in p.message for p in wrong.preflight())


def test_preflight_names_a_missing_binary_and_an_unreachable_server() -> None:
    launch = VLLMInference(TINY, VLLMOptions(executable="no-such-vllm-binary"))
    (problem,) = launch.preflight()
    assert (
        problem.fatal
        and "no-such-vllm-binary" in problem.message
        and "url" in problem.fix
    )
    dead = f"http://127.0.0.1:{free_port()}"
    (problem,) = VLLMInference(
        TINY, VLLMOptions(url=dead, weight_sync="none")
    ).preflight()
    assert (
        problem.fatal and "cannot reach" in problem.message and dead in problem.message
    )
    with pytest.raises(VLLMError, match="unreachable"):
        VLLMInference(
            TINY, VLLMOptions(url=dead, weight_sync="none", stream=False)
        ).generate([1, 2], Sampling(max_tokens=1))


def test_preflight_rejects_a_restricted_output_vocabulary(tmp_path) -> None:
    options = VLLMOptions(executable="no-such-vllm-binary")
    restricted = TINY.model_copy(update={"config": {"output_vocab": 8192}})
    assert any("output_vocab" in p.message for p in VLLMInference(restricted, options).preflight())
    (tmp_path / "config.json").write_text(json.dumps({"output_vocab": 8192}))
    saved = TINY.model_copy(update={"path": str(tmp_path)})
    assert any("output_vocab" in p.message for p in VLLMInference(saved, options).preflight())
    assert not any("output_vocab" in p.message for p in VLLMInference(TINY, options).preflight())


def test_plugin_registers_and_builds_from_a_spec(tmp_path) -> None:
    from legorl_vllm import plugin

    from lego_rl.registry import Registry

    reg = Registry()
    reg.add_module(plugin, name="vllm", distribution="legorl-vllm")
    spec = Spec.model_validate(
        {"model": {"name": "m"}, **{k: {"plugin": "x"} for k in ("tasks", "sandbox", "harness", "dialect",
                                                                  "verifier", "optimizer", "trainer")},
         "inference": {"plugin": "vllm", "options": {"url": "http://h:1", "weights_dir": "w"}}}
    )  # fmt: skip
    inf = reg.build(
        "inference",
        "vllm",
        spec.inference.options,
        BuildContext(spec=spec, spec_dir=tmp_path),
    )
    assert (
        isinstance(inf, VLLMInference)
        and inf.weights_dir == tmp_path / "w"
        and inf.served_name == "m"
    )
    reg.remove_module(plugin)


# ---------------------------------------------------------------- weights


@pytest.fixture(scope="module")
def checkpoint(backend, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("ckpt")
    return save_checkpoint(
        build_model(TINY, backend.tokenizer, seed=0), backend.tokenizer, target
    )


def test_weight_updates_reach_the_server_and_bump_the_version(
    checkpoint, prompt, tmp_path
) -> None:
    staged = stage_model_dir(checkpoint, tmp_path / "served")
    own = HFInference(
        ModelSpec(name="tiny", max_context=256, path=str(staged)), CPU, seed=0
    )
    original = (checkpoint / "model.safetensors").read_bytes()
    with FakeVLLM(own, model_dir=staged) as srv:
        inf = VLLMInference(
            TINY, VLLMOptions(url=srv.url, weights_dir=str(staged)), weights_dir=staged
        )
        assert inf.preflight() == []
        before = inf.generate(prompt, Sampling(max_tokens=3, seed=1))
        state = {k: v.clone() for k, v in own.state_dict().items()}
        state[
            "lm_head.weight"
        ].zero_()  # every logit 0: each token has log-prob -log(vocab)
        inf.load_weights(state, version=4)
        after = inf.generate(prompt, Sampling(max_tokens=3, seed=1))
    assert (
        srv.reloads,
        inf.policy_version,
        before.policy_version,
        after.policy_version,
    ) == (1, 4, 0, 4)
    assert after.logprobs == pytest.approx(
        [-math.log(len(own.tokenizer))] * 3, abs=1e-4
    )
    assert before.logprobs != after.logprobs
    assert (
        checkpoint / "model.safetensors"
    ).read_bytes() == original  # the user's checkpoint untouched
    assert not (staged / "model.safetensors").is_symlink()


def test_weights_are_written_only_into_a_staged_directory(checkpoint, tmp_path) -> None:
    with pytest.raises(ValueError, match="not staged"):
        write_weights({}, checkpoint, "float32")
    with pytest.raises(ValueError, match="not staged by legorl-vllm"):
        stage_model_dir(checkpoint, checkpoint)
    staged = stage_model_dir(checkpoint, tmp_path / "s")
    assert (staged / MARKER).is_file() and (staged / "config.json").resolve() == (
        checkpoint / "config.json"
    ).resolve()
    frozen = VLLMInference(
        TINY, VLLMOptions(url="http://127.0.0.1:1", weight_sync="none")
    )
    with pytest.raises(RuntimeError, match="weight_sync: none"):
        frozen.load_weights({}, version=1)


# ---------------------------------------------------------------- launching


@pytest.mark.slow
def test_launch_starts_waits_for_health_and_stops_the_server(tmp_path, prompt) -> None:
    """A stand-in `vllm` executable serves FakeVLLM; the plugin launches, uses and stops it."""
    exe = tmp_path / "vllm"
    exe.write_text(f'#!/bin/sh\nexec {sys.executable} -m legorl_vllm.testing "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    inf = VLLMInference(
        TINY,
        VLLMOptions(
            executable=str(exe), enable_routing_replay=True, startup_timeout_s=120
        ),
        run_dir=tmp_path,
    )
    assert inf.preflight() == []
    try:
        gen = inf.generate(prompt, Sampling(max_tokens=3, seed=0))
        assert len(gen.completion_ids) == len(gen.routing) == 3
        inf.load_weights(
            build_model(TINY, inf.tokenizer, seed=1).state_dict(), version=1
        )
        assert inf.generate(prompt, Sampling(max_tokens=2)).policy_version == 1
        url = inf.url
    finally:
        inf.close()
    log = (tmp_path / "vllm-server.log").read_text()
    assert "--enable-return-routed-experts" in log and "vllm-weights" in log
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/health", timeout=2)


# ---------------------------------------------------------------- one trial through the proxy




class _TwoTurnHarness:
    """Two chat calls like an agent's: the second repeats the first exchange, then a tool result."""

    dialect = "openai-chat"

    def preflight(self):
        return []

    def run(self, sandbox, task, endpoint, timeout):
        from lego_rl.data import Termination
        from lego_rl.kinds import HarnessResult

        url = f"{endpoint.base_url}/v1/chat/completions"
        headers = {"Authorization": f"Bearer {endpoint.api_key}"}
        messages = [{"role": "user", "content": task.instruction}]
        first = httpx.post(
            url,
            json={"model": endpoint.model, "messages": messages},
            headers=headers,
            timeout=60,
        )
        first.raise_for_status()
        messages += [
            first.json()["choices"][0]["message"],
            {"role": "user", "content": "tests still fail"},
        ]
        with httpx.stream("POST", url, json={"model": endpoint.model, "messages": messages, "stream": True},
                          headers=headers, timeout=60) as second:  # fmt: skip
            second.raise_for_status()
            events = [line for line in second.iter_lines() if line.startswith("data:")]
        assert events[-1] == "data: [DONE]"
        return HarnessResult(Termination.COMPLETED)


class _Pass:
    def score(self, sandbox, task):
        from lego_rl.kinds import VerifierResult

        return VerifierResult(1.0)


def test_a_trial_through_the_proxy_records_sampled_tokens_and_routing(server) -> None:
    from legorl_std.dialects.openai_chat import OpenAIChatDialect

    from lego_rl.engine.trial import TrialRunner, TrialSetup
    from lego_rl.kinds import Task
    from lego_rl.proxy.server import ProxyServer

    inference = attached(server, enable_routing_replay=True)
    proxy = ProxyServer(
        inference,
        {"openai-chat": OpenAIChatDialect()},
        model_name="tiny",
        max_context=TINY.max_context,
    )
    proxy.start()
    try:
        setup = TrialSetup(
            sandbox=NullSandboxes(), harness=_TwoTurnHarness(), verifier=_Pass(), proxy=proxy, dialect="openai-chat",
            model_name="tiny", sampling=Sampling(max_tokens=6, temperature=1.0),
        )  # fmt: skip
        result = TrialRunner(setup).run(
            Task(name="t", path=Path("/nonexistent"), instruction="fix a.py"), "trial-1"
        )
    finally:
        proxy.stop()
    assert result.reward == 1.0 and result.termination == "completed", result
    # One segment, unless the re-rendered reply differs from the sampled ids (then a new one starts).
    segments = result.trajectory.segments
    assert sum(len(seg.calls) for seg in segments) == 2
    for segment in segments:
        sampled = [i for i, m in enumerate(segment.loss_mask) if m]
        assert 1 <= len(sampled) <= 12
        assert all(segment.logprobs[i] < 0 for i in sampled)
        assert all(
            r is not None and np.asarray(r).shape == (LAYERS, TOP_K)
            for r in segment.routing
        )
