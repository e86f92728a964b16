"""The verl trainer plugin on CPU: spec -> verl config, unsupported combinations, the agent
loop running a real TrialRunner trial through a stand-in for verl's server client."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verl")

from harness_fakes import NullSandboxes
from legorl_verl.config import TranslationError, resolved, translate
from legorl_verl.options import VerlTrainerOptions
from legorl_verl.output import to_sample
from omegaconf import OmegaConf

from lego_rl.data import Segment, Termination, Trajectory
from lego_rl.kinds import HarnessResult, Task, VerifierResult
from lego_rl.spec.load import raw_spec
from lego_rl.spec.models import Spec

SPECS = Path(__file__).resolve().parents[1] / "specs"
VERL_QUICKSTART = [
    "trainer.plugin=verl",
    "trainer.options={}",
    "inference.plugin=vllm",
    "model.path=/models/tiny",
]


def load(name: str, *overrides: str) -> Spec:
    return Spec.model_validate(raw_spec(SPECS / name, list(overrides), use_env=False))


def verl_config(spec: Spec, tmp_path: Path, **options):
    opts = VerlTrainerOptions.model_validate({**spec.trainer.options, **options})
    return translate(
        spec, opts, run_dir=tmp_path, spec_dir=SPECS,
        optimizer=spec.optimizer.options, filter=spec.filter.options,
    )


def errors_of(spec: Spec, tmp_path: Path, **options) -> dict[str, str]:
    with pytest.raises(TranslationError) as info:
        verl_config(spec, tmp_path, **options)
    return dict(info.value.errors)


# ---------------------------------------------------------------- config translation


def test_training_subagents_is_refused_with_the_reason(tmp_path: Path) -> None:
    errors = errors_of(load("claude-code-swe.yaml", "run.subagents=train"), tmp_path)
    assert "trains the main agent's trajectory of each trial" in errors["run.subagents"]
    assert "subagents: drop" in errors["run.subagents"]


def test_claude_code_swe_translates_to_a_fully_resolved_verl_config(tmp_path: Path) -> None:
    spec = load("claude-code-swe.yaml")
    cfg = resolved(verl_config(spec, tmp_path))  # as shipped
    actor, rollout = cfg["actor_rollout_ref"]["actor"], cfg["actor_rollout_ref"]["rollout"]
    assert cfg["model_engine"] == "megatron" and actor["strategy"] == "megatron"
    assert cfg["actor_rollout_ref"]["model"]["path"] == "Qwen/Qwen3.5-35B-A3B"
    assert rollout["name"] == "vllm" and rollout["tensor_model_parallel_size"] == 4
    assert rollout["gpu_memory_utilization"] == 0.7
    assert rollout["enable_rollout_routing_replay"] is True
    assert actor["megatron"]["router_replay"]["mode"] == "R3"
    assert actor["policy_loss"]["loss_mode"] == "gspo"
    assert (actor["clip_ratio_low"], actor["clip_ratio_high"]) == (0.0003, 0.0004)
    assert actor["loss_agg_mode"] == "seq-mean-token-mean"
    assert cfg["algorithm"]["rollout_correction"]["rollout_is"] == "sequence"
    assert cfg["data"]["train_batch_size"] == 32 and rollout["n"] == 8
    assert rollout["prompt_length"] + rollout["response_length"] == 65536
    assert rollout["agent"]["default_agent_loop"] == "legorl"
    assert Path(rollout["agent"]["agent_loop_config_path"]).is_file()
    assert cfg["trainer"]["total_training_steps"] == 200
    assert (cfg["trainer"]["nnodes"], cfg["trainer"]["n_gpus_per_node"]) == (4, 8)
    assert actor["optim"]["lr"] == 1e-6 and actor["ppo_micro_batch_size_per_gpu"] == 1
    # pass-rate selects tasks before verl; no online resampling unless asked
    assert cfg["algorithm"]["filter_groups"]["enable"] is False
    assert cfg["data"]["train_files"] == str(tmp_path / "verl/tasks.parquet")
    assert cfg["legorl"]["spec"]["run"]["name"] == "claude-code-swe"
    text = OmegaConf.to_yaml(OmegaConf.create(cfg))
    assert "???" not in text and "${" not in text


def test_routing_replay_on_fsdp_is_refused_naming_megatron(tmp_path: Path) -> None:
    errors = errors_of(load("claude-code-swe.yaml", "trainer.options.strategy=fsdp"), tmp_path)
    assert "megatron" in errors["trainer.options.strategy"]


def test_quickstart_on_verl_grpo_and_online_filter(tmp_path: Path) -> None:
    spec = load("mini-swe-agent-local.yaml", *VERL_QUICKSTART, "filter.plugin=group-variance")
    cfg = resolved(verl_config(spec, tmp_path, async_mode="one-step-off"))
    actor = cfg["actor_rollout_ref"]["actor"]
    assert cfg["model_engine"] == "dp" and actor["policy_loss"]["loss_mode"] == "vanilla"
    assert (actor["clip_ratio_low"], actor["clip_ratio_high"]) == (0.2, 0.28)
    assert cfg["algorithm"]["adv_estimator"] == "grpo"
    assert cfg["algorithm"]["rollout_correction"]["rollout_is"] == "token"
    assert cfg["algorithm"]["filter_groups"] == {
        **cfg["algorithm"]["filter_groups"], "enable": True, "metric": "reward", "max_num_gen_batches": 2,
    }
    assert cfg["trainer"]["v1"]["trainer_mode"] == "colocate_async"
    assert cfg["actor_rollout_ref"]["rollout"]["enable_rollout_routing_replay"] is False
    assert cfg["trainer"]["logger"] == ["console"]


def test_ppo_maps_to_rloo_and_dual_clip(tmp_path: Path) -> None:
    spec = load("mini-swe-agent-local.yaml", *VERL_QUICKSTART, "optimizer.plugin=ppo",
                "optimizer.options.dual_clip=4.0", "optimizer.options.tis_cap=null")
    cfg = resolved(verl_config(spec, tmp_path))
    assert cfg["algorithm"]["adv_estimator"] == "rloo"
    assert cfg["actor_rollout_ref"]["actor"]["clip_ratio_c"] == 4.0
    assert cfg["algorithm"]["rollout_correction"]["rollout_is"] is None


def test_unsupported_combinations_name_the_spec_path(tmp_path: Path) -> None:
    errors = errors_of(load("mini-swe-agent-local.yaml", "trainer.plugin=verl", "trainer.options={}",
                            "inference.plugin=openai-http"), tmp_path)
    assert "cannot be driven by verl" in errors["inference.plugin"]
    assert "pretrained" in errors["model.path"]
    errors = errors_of(load("mini-swe-agent-local.yaml", "trainer.plugin=verl", "trainer.options={}"), tmp_path)
    assert "one actor worker" in errors["trainer.options.gpus_per_node"]  # hf: the CPU rollout
    spec = load("mini-swe-agent-local.yaml", *VERL_QUICKSTART, "inference.options.extra_args=[]")
    assert "inference.options.extra_args" in errors_of(spec, tmp_path)


def test_raw_overrides_apply_and_typos_are_errors(tmp_path: Path) -> None:
    spec = load("mini-swe-agent-local.yaml", *VERL_QUICKSTART)
    cfg = resolved(verl_config(spec, tmp_path, overrides={"actor_rollout_ref.actor.ppo_epochs": 2}))
    assert cfg["actor_rollout_ref"]["actor"]["ppo_epochs"] == 2
    errors = errors_of(spec, tmp_path, overrides={"actor_rollout_ref.actor.ppo_epoch": 2})
    assert "no such key" in errors["trainer.options.overrides.actor_rollout_ref.actor.ppo_epoch"]


def test_plan_shows_the_verl_config(tmp_path: Path) -> None:
    from lego_rl.cli.plan import plugin_details
    from lego_rl.registry import default_registry
    from lego_rl.spec.resolve import load_and_resolve

    reg = default_registry()
    path = SPECS / "claude-code-swe.yaml"
    details = plugin_details(load_and_resolve(path, reg), reg, path)
    assert details["trainer"]["verl config"]["actor_rollout_ref"]["rollout"]["name"] == "vllm"
    fsdp = load_and_resolve(path, reg, ["trainer.options.strategy=fsdp"])
    assert "megatron" in plugin_details(fsdp, reg, path)["trainer"]["error"]


# ---------------------------------------------------------------- trajectory -> verl sample


def segment(pattern: str, start: int = 0) -> Segment:
    """'p' prompt token, 's' sampled token (routing known), 't' tool token."""
    ids = list(range(start, start + len(pattern)))
    return Segment(
        ids=ids,
        loss_mask=[int(c == "s") for c in pattern],
        logprobs=[-0.5 if c == "s" else 0.0 for c in pattern],
        routing=[[[i % 4, (i + 1) % 4]] * 2 if c != "t" else None for i, c in zip(ids, pattern, strict=True)],
    )


def test_sample_splits_at_the_first_sampled_token_and_keeps_masks() -> None:
    seg = segment("pppssstts")
    sample = to_sample(Trajectory(session="x", segments=[seg]), prompt_length=8, response_length=8,
                       pad_id=0, routing_shape=(2, 2))
    assert sample.prompt_ids == seg.ids[:3]
    assert sample.response_ids == seg.ids[3:]
    assert sample.response_mask == [1, 1, 1, 0, 0, 1]
    assert sample.response_logprobs == [-0.5, -0.5, -0.5, 0.0, 0.0, -0.5]
    assert sample.routed_experts.shape == (9, 2, 2) and sample.routed_experts.dtype == np.int16
    assert sample.routed_experts[3].tolist() == seg.routing[3]
    assert not sample.routed_experts[6].any()  # tool token: routing unknown -> zero row
    assert sample.stats["untrained_tokens"] == 0


def test_long_prompt_moves_into_the_response_and_overflow_goes_to_the_prompt() -> None:
    seg = segment("pppppss")
    sample = to_sample(Trajectory(session="x", segments=[seg]), prompt_length=3, response_length=8, pad_id=0)
    assert len(sample.prompt_ids) == 3 and sample.response_mask == [0, 0, 1, 1]
    sample = to_sample(Trajectory(session="x", segments=[segment("pssss")]), prompt_length=4,
                       response_length=2, pad_id=0)
    assert len(sample.response_ids) == 2 and sample.stats["untrained_tokens"] == 2


def test_multi_segment_trajectories_train_one_segment() -> None:
    traj = Trajectory(session="x", segments=[segment("psssss"), segment("pps", 100)])
    last = to_sample(traj, prompt_length=8, response_length=8, pad_id=0)
    assert last.prompt_ids == [100, 101] and last.stats == {
        "segments": 2, "trained_tokens": 1, "untrained_tokens": 5, "routed_tokens": 3}
    most = to_sample(traj, prompt_length=8, response_length=8, pad_id=0, choose="most-trained")
    assert most.prompt_ids == [0] and sum(most.response_mask) == 5


def test_a_trial_without_tokens_is_one_masked_token() -> None:
    sample = to_sample(None, prompt_length=4, response_length=4, pad_id=7, routing_shape=(2, 2))
    assert sample.response_ids == [7] and sample.response_mask == [0] and sample.prompt_ids == []
    assert sample.routed_experts.shape == (1, 2, 2)


# ---------------------------------------------------------------- the agent loop, end to end


class StandInServerClient:
    """verl's LLMServerClient.generate shape: whole-sequence routing minus the last token."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, []

    async def generate(self, request_id, *, prompt_ids, sampling_params):
        from verl.workers.rollout.replica import TokenOutput

        self.calls.append((request_id, list(prompt_ids), dict(sampling_params)))
        ids = self.tokenizer.encode(f"reply {len(self.calls)}") + [self.tokenizer.eos_token_id]
        rows = len(prompt_ids) + len(ids) - 1
        routed = np.stack([np.arange(rows) % 4, (np.arange(rows) + 1) % 4], axis=-1)[:, None, :]
        return TokenOutput(
            token_ids=ids, log_probs=[-0.25] * len(ids), routed_experts=np.repeat(routed, 3, axis=1),
            stop_reason="completed", extra_fields={"max_global_steps": 3},
        )


class TwoCallHarness:
    """Talks to the proxy like a harness: a second call that extends the first."""

    dialect = "openai-chat"

    def preflight(self):
        return []

    def run(self, sandbox, task, endpoint, timeout):
        import httpx

        messages = [{"role": "user", "content": task.instruction}]
        for _ in range(2):
            reply = httpx.post(
                f"{endpoint.base_url}/v1/chat/completions",
                headers={"authorization": f"Bearer {endpoint.api_key}"},
                json={"model": endpoint.model, "messages": messages}, timeout=30,
            ).json()
            messages += [reply["choices"][0]["message"], {"role": "user", "content": "go on"}]
        return HarnessResult(Termination.COMPLETED, exit_code=0)




class RewritingHarness(TwoCallHarness):
    """A second call that does not extend the first (a compaction): a new segment."""

    def run(self, sandbox, task, endpoint, timeout):
        import httpx

        for content in (task.instruction, "a summary of the work so far; go on"):
            httpx.post(
                f"{endpoint.base_url}/v1/chat/completions",
                headers={"authorization": f"Bearer {endpoint.api_key}"},
                json={"model": endpoint.model, "messages": [{"role": "user", "content": content}]}, timeout=30,
            ).raise_for_status()
        return HarnessResult(Termination.COMPLETED, exit_code=0)


class Passing:
    def score(self, sandbox, task):
        return VerifierResult(1.0)


def test_agent_loop_runs_a_trial_through_the_server_client(tmp_path: Path) -> None:
    from legorl_std.dialects.openai_chat import OpenAIChatDialect
    from legorl_verl.agent_loop import LegoRLAgentLoop
    from legorl_verl.trials import TrialKit
    from verl.experimental.agent_loop.agent_loop import (
        DictConfigWrap,
        _agent_loop_registry,
    )

    from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

    assert _agent_loop_registry["legorl"]["_target_"] == "legorl_verl.agent_loop.LegoRLAgentLoop"
    spec = load("mini-swe-agent-local.yaml", *VERL_QUICKSTART, "inference.options.enable_routing_replay=true",
                "run.max_tokens=32")
    cfg = verl_config(spec, tmp_path, strategy="megatron", prompt_length=64)
    task = Task(name="t1", path=tmp_path, instruction="fix the bug")
    kit = TrialKit(spec=spec, tasks={"t1": task}, sandbox=NullSandboxes(), harness=TwoCallHarness(),
                   verifier=Passing(), dialect=OpenAIChatDialect())
    tokenizer = tiny_chat_tokenizer()
    client = StandInServerClient(tokenizer)
    agent = LegoRLAgentLoop(DictConfigWrap(cfg), client, tokenizer, kit=kit)

    out = asyncio.run(agent.run({"temperature": 1.0}, extra_info={"task": "t1", "index": 0}))

    assert out.reward_score == 1.0 and out.num_turns == 2
    assert out.extra_fields["legorl_termination"] == "completed"
    (rid1, prompt1, params), (rid2, prompt2, _) = client.calls
    assert rid1 == rid2 == out.extra_fields["legorl_trial"]  # sticky: one trial, one server
    assert params["max_tokens"] == 32 and params["logprobs"] is True
    # one segment: the first prompt, then reply 1, the follow-up (mask 0), reply 2
    assert out.prompt_ids == prompt1
    assert out.prompt_ids + out.response_ids[: len(prompt2) - len(prompt1)] == prompt2
    reply = tokenizer.encode("reply 1") + [tokenizer.eos_token_id]
    assert out.response_ids[: len(reply)] == reply
    assert sum(out.response_mask) == 2 * len(reply) and out.response_mask[-1] == 1
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
    assert all(lp == -0.25 for lp, m in zip(out.response_logprobs, out.response_mask) if m)
    routed = out.routed_experts
    assert routed.shape == (len(out.prompt_ids) + len(out.response_ids), 3, 2)
    assert routed[len(prompt1)].tolist() == [[len(prompt1) % 4, (len(prompt1) + 1) % 4]] * 3
    assert not routed[-1].any()  # the engine never fed the last token: unknown, zero row
    tensors = out.as_dict()
    assert tensors["routed_experts"].shape[0] == tensors["prompts"].shape[0] + tensors["responses"].shape[0]
    assert tensors["rm_scores"][-1] == 1.0


def test_a_rewritten_history_trains_every_segment_as_verls_list_of_outputs(tmp_path: Path) -> None:
    from legorl_std.dialects.openai_chat import OpenAIChatDialect
    from legorl_verl.agent_loop import LegoRLAgentLoop
    from legorl_verl.trials import TrialKit
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

    spec = load("mini-swe-agent-local.yaml", *VERL_QUICKSTART, "run.max_tokens=32")
    task = Task(name="t1", path=tmp_path, instruction="fix the bug")
    tokenizer = tiny_chat_tokenizer()

    def run(segments: str):
        kit = TrialKit(spec=spec, tasks={"t1": task}, sandbox=NullSandboxes(), harness=RewritingHarness(),
                       verifier=Passing(), dialect=OpenAIChatDialect())
        client = StandInServerClient(tokenizer)
        agent = LegoRLAgentLoop(DictConfigWrap(verl_config(spec, tmp_path, prompt_length=64, segments=segments)),
                                client, tokenizer, kit=kit)
        return asyncio.run(agent.run({"temperature": 1.0}, extra_info={"task": "t1", "index": 0})), client

    outs, client = run("all")
    assert isinstance(outs, list) and len(outs) == 2  # verl v1 takes the list, each output a sample
    (_, prompt1, _), (_, prompt2, _) = client.calls
    replies = [tokenizer.encode(f"reply {n}") + [tokenizer.eos_token_id] for n in (1, 2)]
    for out, prompt, reply, index in zip(outs, (prompt1, prompt2), replies, (0, 1), strict=True):
        assert out.prompt_ids == prompt and out.response_ids == reply
        assert sum(out.response_mask) == len(reply) == len(out.response_logprobs)
        assert out.reward_score == 1.0 and out.extra_fields["legorl_segment"] == index
        assert out.extra_fields["legorl_untrained_tokens"] == 0
        assert out.extra_fields["min_global_steps"] == out.extra_fields["max_global_steps"] == 3
        assert out.as_dict()["rm_scores"][-1] == 1.0
    one, _ = run("last")  # one sample: the first segment is reported, not trained
    assert one.prompt_ids == prompt2 and one.extra_fields["legorl_untrained_tokens"] == len(replies[0])
    errors = errors_of(spec, tmp_path, segments="all", overrides={"trainer.use_v1": False})
    assert "v1" in errors["trainer.options.segments"]


@pytest.mark.parametrize(
    ("termination", "attribution", "trained"),
    [("sandbox_error", "infrastructure", 0), ("agent_timeout", "policy", 3)],
    ids=["infrastructure-masked", "policy-failure-trains"],
)
def test_failed_trials_reach_verl_masked_or_with_reward_zero(tmp_path: Path, termination, attribution, trained) -> None:
    from legorl_verl.agent_loop import LegoRLAgentLoop
    from legorl_verl.trials import TrialKit
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from lego_rl.data import Attribution, TrialResult
    from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

    spec = load("mini-swe-agent-local.yaml", *VERL_QUICKSTART)
    cfg = verl_config(spec, tmp_path, prompt_length=8)
    kit = TrialKit(spec=spec, tasks={}, sandbox=NullSandboxes(), harness=TwoCallHarness(),
                   verifier=Passing(), dialect=None)
    agent = LegoRLAgentLoop(DictConfigWrap(cfg), None, tiny_chat_tokenizer(), kit=kit)
    result = TrialResult(trial_id="t", task="t1", reward=0.0, termination=Termination(termination),
                         attribution=Attribution(attribution),
                         trajectory=Trajectory(session="x", segments=[segment("ppsssp")]))
    out = agent.output(result, 1.0)
    assert out.reward_score == 0.0 and sum(out.response_mask) == trained
    info = out.extra_fields["reward_extra_info"]
    assert (info["legorl_attribution"], info["legorl_termination"]) == (attribution, termination)
    assert info["legorl_trained_tokens"] == trained and info["legorl_retried"] == ""


CORRECTIONS = [
    {"is_threshold": [0.6, 2.0]},
    {"is_level": "sequence", "is_threshold": 1.2},
    {"is_threshold": 2.0, "reject": [{"mode": "token_k1", "low": 0.01, "high": 2.0}]},
    {"reject": [{"mode": "seq_mean_k1", "low": 0.95, "high": 1.05}, {"mode": "seq_sum_k1", "low": 0.5, "high": 1.2}]},
]


@pytest.mark.parametrize("correction", CORRECTIONS, ids=["icepop", "sequence-tis", "token-mis", "geo-mean-and-seq-mis"])
def test_rollout_correction_maps_to_verls_keys_with_the_same_weights(correction: dict, tmp_path: Path) -> None:
    """verl's own rollout-correction functions, given the translated keys, weigh a constructed
    batch as the embedded objective does (verl's k1 bounds pi_rollout / pi_train: inverted)."""
    import torch
    from legorl_embedded.objectives.batch import PolicyBatch
    from legorl_embedded.objectives.correction import correct
    from legorl_embedded.objectives.correction_options import RolloutCorrection
    from verl.trainer.ppo.rollout_corr_helper import (
        compute_rollout_correction_weights,
        compute_rollout_rejection_mask,
    )

    spec = load("mini-swe-agent-local.yaml", *VERL_QUICKSTART)
    spec.optimizer.options = {**spec.optimizer.options, "correction": correction}
    rc = resolved(verl_config(spec, tmp_path))["algorithm"]["rollout_correction"]
    log_ratio = torch.tensor([[3.0, 0.5, 1.0], [1.1, 0.9, 1.0]]).log()
    mask = torch.ones(2, 3)
    ours = correct(
        PolicyBatch(logprobs=torch.zeros(2, 3), inference_logprobs=-log_ratio, mask=mask, advantages=torch.ones(2),
                    seq_tokens=mask.sum(1), token_total=6.0, seq_total=2.0, old_logprobs=torch.zeros(2, 3)),  # fmt: skip
        torch.zeros(2, 3), RolloutCorrection.model_validate(correction),
    ).weight
    theirs = torch.ones(2, 3)
    if rc["rollout_is"] is not None:
        theirs, _ = compute_rollout_correction_weights(log_ratio, mask, rc["rollout_is"], rc["rollout_is_threshold"])
    if rc["rollout_rs"]:
        kept, _ = compute_rollout_rejection_mask(log_ratio, mask, rc["rollout_rs"], rc["rollout_rs_threshold"])
        theirs = theirs * kept
    assert torch.allclose(ours, theirs, atol=1e-5), (ours, theirs, rc)


def test_a_rejection_band_from_zero_has_no_verl_form(tmp_path: Path) -> None:
    spec = load("mini-swe-agent-local.yaml", *VERL_QUICKSTART)
    spec.optimizer.options = {**spec.optimizer.options, "correction": {"reject": [{"mode": "token_k1", "high": 2.0}]}}
    assert "positive low" in errors_of(spec, tmp_path)["optimizer.options.correction.reject[0].low"]
