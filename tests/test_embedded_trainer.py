"""The embedded trainer's loop, run against a fake RunContext with a tiny MoE (CPU, seconds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from legorl_embedded import plugin  # noqa: E402
from legorl_embedded.objectives.grpo import GRPO, GRPOOptions  # noqa: E402
from legorl_embedded.policy.model import build_model  # noqa: E402
from legorl_embedded.training.trainer import EmbeddedTrainer, EmbeddedTrainerOptions  # noqa: E402

from lego_rl.data import Attribution, Segment, Termination, Trajectory, TrialResult  # noqa: E402
from lego_rl.kinds import Event, RunContext  # noqa: E402
from lego_rl.registry import Registry  # noqa: E402
from lego_rl.spec.models import Block, ModelSpec, RunSpec, Spec  # noqa: E402

VOCAB = 512
MODEL = ModelSpec(
    name="tiny", config={"hidden_size": 32, "head_dim": 8, "moe_intermediate_size": 32}
)


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread, above all on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class TinyTokenizer:
    """Just what build_model and save_checkpoint ask of a tokenizer."""

    eos_token_id = 1
    pad_token_id = 0

    def __len__(self) -> int:
        return VOCAB

    def save_pretrained(self, path: str) -> None:
        (Path(path) / "tokenizer.marker").write_text("tiny")


class FakeInference:
    """Keeps its own copy of the policy; records every weight push."""

    def __init__(self) -> None:
        self.tokenizer = TinyTokenizer()
        self.model = build_model(MODEL, self.tokenizer, seed=123)  # differs until weights arrive
        self.policy_version = -1
        self.pushes: list[tuple[int, dict[str, torch.Tensor]]] = []

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        self.model.load_state_dict(state_dict)
        self.policy_version = version
        self.pushes.append((version, {k: v.detach().clone() for k, v in state_dict.items()}))

    def sample(self, prompt: list[int], n: int, gen: torch.Generator) -> Segment:
        ids, lps = list(prompt), []
        with torch.no_grad():
            for _ in range(n):
                logits = self.model(input_ids=torch.tensor([ids])).logits[0, -1].float()
                logp = torch.log_softmax(logits, -1)
                token = int(torch.multinomial(logp.exp(), 1, generator=gen))
                ids.append(token)
                lps.append(float(logp[token]))
        return Segment(
            ids=ids, loss_mask=[0] * len(prompt) + [1] * n, logprobs=[0.0] * len(prompt) + lps
        )


class KeepAll:
    def select_tasks(self, tasks: list[Any]) -> list[Any]:
        return tasks

    def keep_group(self, group: list[TrialResult]) -> bool:
        return True


def make_ctx(
    tmp_path: Path,
    rollout,
    inference: Any,
    steps: int = 2,
    model: ModelSpec = MODEL,
    optimizer: GRPO | None = None,
) -> tuple[RunContext, list[Event], list[str]]:
    block = Block(plugin="fake")
    spec = Spec(
        model=model,
        run=RunSpec(steps=steps, seed=7),
        tasks=block,
        sandbox=block,
        harness=block,
        dialect=block,
        verifier=block,
        optimizer=block,
        inference=block,
        trainer=block,
    )
    events: list[Event] = []
    lines: list[str] = []
    ctx = RunContext(
        spec=spec,
        run_dir=tmp_path,
        inference=inference,
        optimizer=optimizer or GRPO(GRPOOptions()),
        filter=KeepAll(),
        rollout=rollout,
        emit=events.append,
        log=lines.append,
    )
    return ctx, events, lines


def sampled_rollout(inference: FakeInference, rewards: list[list[float]]):
    """Groups of trials sampled from the inference copy (one segment of 6 new tokens each)."""
    gen = torch.Generator().manual_seed(0)

    def rollout(step: int) -> list[list[TrialResult]]:
        groups = []
        for g, group_rewards in enumerate(rewards):
            prompt = [10 + g, 20 + step, 30, 40]
            groups.append(
                [
                    TrialResult(
                        trial_id=f"{step}-{g}-{i}",
                        task=f"task{g}",
                        reward=r,
                        step=step,
                        trajectory=Trajectory(
                            session="s", segments=[inference.sample(prompt, 6, gen)]
                        ),
                    )
                    for i, r in enumerate(group_rewards)
                ]
            )
        return groups

    return rollout


def trainer(**options: Any) -> EmbeddedTrainer:
    return EmbeddedTrainer(EmbeddedTrainerOptions(device="cpu", threads=1, **options))


def test_run_trains_syncs_weights_reports_and_checkpoints(tmp_path):
    inference = FakeInference()
    ctx, events, lines = make_ctx(
        tmp_path, sampled_rollout(inference, [[1, 0, 0], [0, 1, 1]]), inference
    )
    trainer(lr=1e-2, micro_batch_tokens=25).run(ctx)

    assert [v for v, _ in inference.pushes] == [0, 1, 2]
    first, second = inference.pushes[0][1], inference.pushes[1][1]
    assert any(not torch.equal(first[k], second[k]) for k in first), (
        "a step with advantages moved no weight"
    )

    steps = [e.data for e in events if e.kind == "step"]
    assert [s["step"] for s in steps] == [0, 1]
    for s in steps:
        assert s["informative_groups"] == 2 and s["groups"] == 2 and s["trials"] == 6
        assert s["trained_tokens"] == 36
        assert s["reward_mean"] == pytest.approx(0.5)
        assert s["grad_norm"] > 0 and s["loss"] != 0
        # the rollout of each step sampled from the weights pushed before it
        assert s["logp_diff_abs"] < 1e-4 and s["tis_weight_mean"] == pytest.approx(1.0, abs=1e-3)
        assert s["policy_version"] == s["step"] + 1
        assert {"step_seconds", "rollout_seconds", "clip_fraction", "k3_kl", "prob_pearson"} <= s.keys()
        assert s["routing_recorded_share"] == 0.0 and "routing_agreement" not in s
    assert (
        lines[0].startswith("step 1/2  reward 0.500  loss ")
        and "informative 2/2  tokens 36" in lines[0]
    )

    saved = [e.data for e in events if e.kind == "checkpoint"]
    assert saved == [{"path": str(tmp_path / "checkpoints" / "final"), "step": 2}]
    loaded = transformers.AutoModelForCausalLM.from_pretrained(saved[0]["path"])
    final = inference.pushes[-1][1]
    assert all(torch.equal(v, final[k]) for k, v in loaded.state_dict().items())
    assert (Path(saved[0]["path"]) / "tokenizer.marker").exists()


def test_step_without_informative_group_has_zero_loss_and_keeps_weights(tmp_path):
    inference = FakeInference()
    ctx, events, lines = make_ctx(
        tmp_path, sampled_rollout(inference, [[1, 1], [0, 0]]), inference, steps=1
    )
    trainer(checkpoint="none").run(ctx)

    (step,) = [e.data for e in events if e.kind == "step"]
    assert step["loss"] == 0.0 and step["informative_groups"] == 0 and step["trained_tokens"] == 24
    assert "no informative group" in lines[0]
    before, after = inference.pushes[0][1], inference.pushes[1][1]
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not (tmp_path / "checkpoints").exists()


def test_infrastructure_failures_and_empty_trials_are_not_trained(tmp_path):
    inference = FakeInference()
    sampled = sampled_rollout(inference, [[1, 0]])

    def rollout(step: int) -> list[list[TrialResult]]:
        (group,) = sampled(step)
        crashed = group[0].model_copy(
            update={
                "trial_id": "crash",
                "reward": 0.0,
                "termination": Termination.SANDBOX_ERROR,
                "attribution": Attribution.INFRASTRUCTURE,
            }
        )
        empty = TrialResult(trial_id="empty", task="task0", reward=1.0)
        return [group + [crashed, empty]]

    ctx, events, _ = make_ctx(tmp_path, rollout, inference, steps=1)
    trainer(checkpoint="none").run(ctx)
    (step,) = [e.data for e in events if e.kind == "step"]
    assert (
        step["trials"] == 4 and step["infrastructure_trials"] == 1 and step["skipped_trials"] == 1
    )
    assert step["trained_trials"] == 2 and step["trained_tokens"] == 12


def test_kl_penalty_is_measured_against_the_frozen_initial_policy(tmp_path):
    inference = FakeInference()
    rollout = sampled_rollout(inference, [[1, 0], [0, 1]])
    ctx, events, _ = make_ctx(
        tmp_path, rollout, inference, steps=3, optimizer=GRPO(GRPOOptions(kl_coef=0.5))
    )
    trainer(lr=1e-2, checkpoint="none").run(ctx)
    kl = [e.data["kl_ref"] for e in events if e.kind == "step"]
    assert kl[0] == pytest.approx(0.0, abs=1e-6) and kl[2] > 1e-5


def with_routing(inference: FakeInference, rollout, shift: int = 0):
    """The rollout's segments with the routing of the inference copy (experts + shift)."""
    from legorl_embedded.policy.routing import RoutingRecorder

    def routed(step: int) -> list[list[TrialResult]]:
        groups = rollout(step)
        for group in groups:
            for result in group:
                for seg in result.trajectory.segments:
                    with torch.no_grad(), RoutingRecorder(inference.model) as rec:
                        inference.model(input_ids=torch.tensor([seg.ids]))
                        experts = (rec.pop() + shift) % inference.model.config.num_experts
                    seg.routing = experts.tolist()
        return groups

    return routed


@pytest.mark.parametrize(
    ("shift", "replay", "agreement", "consistent"),
    [(0, "replay", 1.0, True), (1, "replay", 0.0, False), (1, "off", 0.0, True)],
    ids=["recorded-replayed", "wrong-routing-replayed", "wrong-routing-off"],
)
def test_trainer_replays_recorded_routing_and_reports_consistency(
    tmp_path, shift, replay, agreement, consistent
):
    inference = FakeInference()
    rollout = with_routing(inference, sampled_rollout(inference, [[1, 0]]), shift)
    ctx, events, _ = make_ctx(tmp_path, rollout, inference, steps=1)
    trainer(checkpoint="none", routing_replay=replay).run(ctx)
    (step,) = [e.data for e in events if e.kind == "step"]
    assert step["routing_recorded_share"] == 1.0
    assert step["routing_agreement"] == agreement
    # forcing experts the sampler did not use changes the trainer's log-probs
    assert (step["logp_diff_abs"] < 1e-4) == consistent
    assert (step["prob_pearson"] > 0.9999) == consistent
    assert step["ratio_outside"] == 0.0 or not consistent


def deterministic_rollout(inference: FakeInference, fail_at: int | None = None):
    """Sampled from the pushed weights with a per-step seed; raises at ``fail_at`` (a kill)."""

    def rollout(step: int) -> list[list[TrialResult]]:
        if step == fail_at:
            raise KeyboardInterrupt("killed between steps")
        return sampled_rollout(inference, [[1, 0, 1], [0, 0, 1]])(step)

    return rollout


def test_killed_run_resumes_from_its_checkpoint_to_the_same_state(tmp_path):
    def run(where: Path, fail_at: int | None = None, engine: dict | None = None):
        inference = FakeInference()
        ctx, events, lines = make_ctx(where, deterministic_rollout(inference, fail_at), inference, steps=4)
        position = {"next": 0} if engine is None else engine
        ctx.engine_state = lambda: dict(position)
        ctx.restore_engine = position.update
        trainer(lr=1e-2, warmup_steps=3).run(ctx)
        return inference, events, lines, position

    straight, *_ = run(tmp_path / "straight")
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "killed", fail_at=2)
    saved = tmp_path / "killed" / "checkpoints" / "last"
    assert saved.is_symlink() and (saved / "trainer.pt").is_file()
    resumed, events, lines, position = run(tmp_path / "killed", engine={"next": -1})

    assert [v for v, _ in resumed.pushes] == [2, 3, 4], "resumed at step 3 with version 2 weights"
    assert [e.data["step"] for e in events if e.kind in ("resume", "step")] == [2, 2, 3]
    assert position == {"next": 0} and lines[0] == f"resumed from {saved} at step 3"
    final, expected = resumed.pushes[-1][1], straight.pushes[-1][1]
    assert all(torch.equal(final[k], expected[k]) for k in expected)
    assert sorted(p.name for p in saved.parent.iterdir()) == ["final", "last", "state-000004"]


def test_inference_without_weight_sync_is_refused_with_a_fix(tmp_path):
    class NoSync:
        tokenizer = TinyTokenizer()
        policy_version = 0

    ctx, _, _ = make_ctx(tmp_path, lambda step: [], NoSync())
    with pytest.raises(TypeError, match="load_weights.*'hf'"):
        trainer().run(ctx)


def test_preflight_flags_cuda_without_gpu():
    problems = EmbeddedTrainer(EmbeddedTrainerOptions(device="cuda")).preflight()
    if torch.cuda.is_available():
        assert problems == []
    else:
        assert len(problems) == 1 and problems[0].fatal and "GPU" in problems[0].message
    assert EmbeddedTrainer(EmbeddedTrainerOptions(device="cpu")).preflight() == []


def test_trainer_registers_with_strict_options():
    registry = Registry()
    registry.add_module(plugin, name="embedded-test")
    built = registry.build("trainer", "embedded", {"lr": 5e-4, "checkpoint": "every"})
    assert isinstance(built, EmbeddedTrainer) and built.options.lr == 5e-4
    with pytest.raises(ValueError, match="learning_rate"):
        registry.build("trainer", "embedded", {"learning_rate": 5e-4})


@pytest.mark.slow
def test_run_with_hf_inference_and_qwen3_vocabulary_scores_what_was_sampled(tmp_path):
    """The real inference plugin samples, the trainer scores the same tokens (151k vocab)."""
    import time

    from legorl_embedded.inference.hf import HFInference

    from lego_rl.data import Sampling

    inference = HFInference(ModelSpec(name="tiny"), seed=99)
    prompt = inference.tokenizer.encode("def add(a, b):")
    sampling = Sampling(temperature=1.0, max_tokens=24, seed=None)

    def rollout(step: int) -> list[list[TrialResult]]:
        groups = []
        for g in range(2):
            trials = []
            for i in range(4):
                gen = inference.generate(prompt, sampling)
                assert gen.policy_version == step
                seg = Segment(
                    ids=prompt + gen.completion_ids,
                    loss_mask=[0] * len(prompt) + [1] * len(gen.completion_ids),
                    logprobs=[0.0] * len(prompt) + gen.logprobs,
                )
                traj = Trajectory(session=f"{step}-{g}-{i}", segments=[seg])
                trials.append(
                    TrialResult(
                        trial_id=f"{step}-{g}-{i}",
                        task=f"t{g}",
                        reward=float(i % 2),
                        trajectory=traj,
                    )
                )
            groups.append(trials)
        return groups

    ctx, events, lines = make_ctx(tmp_path, rollout, inference, model=ModelSpec(name="tiny"))
    started = time.perf_counter()
    trainer(checkpoint="final").run(ctx)
    steps = [e.data for e in events if e.kind == "step"]
    print("\n".join(lines), f"\ntotal {time.perf_counter() - started:.1f}s")
    assert inference.policy_version == 2
    for s in steps:
        assert s["logp_diff_abs"] < 1e-3 and s["trained_tokens"] > 0
    assert (tmp_path / "checkpoints" / "final" / "config.json").exists()
