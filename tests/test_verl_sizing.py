"""verl on GPUs, before anything starts: the memory estimate per GPU (parameters counted from
the model's own config), the layout keys verl's engines read, rollout replicas, and what a run
on several nodes needs shared."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("verl")

from legorl_verl.config import resolved
from legorl_verl.nodes import fs_type, mounts, shared_path_problems, sharing
from legorl_verl.sizing import GB, Layout, estimate, find_config, shape_of
from test_verl_plugin import SPECS, VERL_QUICKSTART, errors_of, load, verl_config

from lego_rl.registry import BuildContext

TINY_MOE = {
    "model_type": "qwen3_moe", "vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
    "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2, "tie_word_embeddings": False,
}


def headline_trainer(*overrides: str):
    from legorl_verl.trainer import VerlTrainer

    spec = load("claude-code-swe.yaml", *overrides)
    ctx = BuildContext(spec=spec, run_dir=Path("/nonexistent/run"), spec_dir=SPECS)
    from legorl_verl.options import VerlTrainerOptions

    return VerlTrainer(VerlTrainerOptions.model_validate(spec.trainer.options), ctx), spec


# ---------------------------------------------------------------- parameters from the config


def test_the_headline_models_parameters_are_those_its_name_states() -> None:
    found = find_config("Qwen/Qwen3.5-35B-A3B", SPECS)
    assert found is not None
    shape = shape_of(*found)
    assert abs(shape.params / 35e9 - 1) < 0.05  # "35B"
    assert 3e9 <= shape.active_params < 4e9  # "A3B"
    assert (shape.layers, shape.experts, shape.experts_per_token) == (40, 256, 8)
    assert shape.attention_layers == 10  # one layer in four has a KV cache (the rest: Gated DeltaNet)


def test_expert_parameters_are_told_apart_by_name() -> None:
    shape = shape_of(dict(TINY_MOE), "test")
    c = TINY_MOE
    routed = c["num_hidden_layers"] * c["num_experts"] * 3 * c["hidden_size"] * c["moe_intermediate_size"]
    assert shape.expert_params == routed
    assert shape.embedding_params == 2 * c["vocab_size"] * c["hidden_size"]  # untied input and output
    assert shape.active_params == shape.params - routed + routed * 2 // 8


def test_a_local_checkpoint_config_wins_and_an_unknown_model_has_none(tmp_path: Path) -> None:
    import json

    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(TINY_MOE))
    config, source = find_config("ckpt", tmp_path) or ({}, "")
    assert config["num_experts"] == 8 and source.endswith("ckpt/config.json")
    assert find_config("nobody/no-such-model", tmp_path) is None


# ---------------------------------------------------------------- the estimate


def test_megatron_terms_follow_the_parallel_sizes() -> None:
    shape = shape_of(dict(TINY_MOE), "test")
    layout = Layout(strategy="megatron", gpus=8, gpu_gb=80, tensor=2, expert=4, expert_tensor=1,
                    micro_tokens=1024, rollout_tensor=1, max_model_len=1024)
    est = estimate(shape, layout)
    dense = shape.params - shape.expert_params
    per_gpu = dense / 2 + shape.expert_params / 4
    assert est.training["weights (bf16)"] == pytest.approx(2 * per_gpu / GB)
    assert est.training["gradients (fp32)"] == pytest.approx(4 * per_gpu / GB)
    # distributed optimizer: dense over data parallel 4, experts over expert data parallel 2
    assert est.training["optimizer (fp32 master, moments)"] == pytest.approx(
        12 * (dense / 2 / 4 + shape.expert_params / 4 / 2) / GB
    )
    wider = estimate(shape, Layout(**{**layout.__dict__, "expert": 8}))
    assert wider.training["weights (bf16)"] < est.training["weights (bf16)"]
    chunked = estimate(shape, Layout(**{**layout.__dict__, "fused_logits": True}))
    assert chunked.training["logits"] == 0 < est.training["logits"]
    assert est.fits
    uneven = estimate(shape, Layout(**{**layout.__dict__, "expert": 3}))
    assert "8 routed experts do not split evenly over a parallel size of 3" in uneven.problems


def test_the_headline_spec_fits_and_plan_shows_each_term() -> None:
    trainer, spec = headline_trainer()
    assert not [p for p in trainer.preflight() if "fit" in p.message]
    memory = trainer.plan_details(spec)["GPU memory per device"]
    assert memory["verdict"] == "fits"
    training, rollout = memory["training GB per GPU"], memory["rollout GB per GPU"]
    assert 30 < training["total"] <= 80 and rollout["total"] <= 80
    assert training["logits"] == 0  # fused kernels
    assert "tensor 2, expert 8" in memory["layout"] and "34.66B" in memory["model"]


def test_a_layout_that_cannot_fit_is_refused_with_the_numbers() -> None:
    trainer, _ = headline_trainer(
        "trainer.options.parallel={}", "trainer.options.offload={}", "trainer.options.overrides={}"
    )
    (problem,) = [p for p in trainer.preflight() if "cannot fit" in p.message]
    assert problem.fatal
    assert "training needs ~" in problem.message and "> 80 GB" in problem.message
    assert "trainer.options.parallel" in problem.fix


def test_no_config_here_is_a_warning_not_a_guess() -> None:
    trainer, _ = headline_trainer("model.path=nobody/no-such-model", "model.tokenizer=qwen3")
    (problem,) = [p for p in trainer.preflight() if "not estimated" in p.message]
    assert not problem.fatal and "nobody/no-such-model" in problem.message


# ---------------------------------------------------------------- layout keys and replicas


def test_gradient_checkpointing_is_megatrons_full_recompute(tmp_path: Path) -> None:
    spec = load("claude-code-swe.yaml")
    megatron = resolved(verl_config(spec, tmp_path))["actor_rollout_ref"]["actor"]["megatron"]
    recompute = megatron["override_transformer_config"]
    assert (recompute["recompute_granularity"], recompute["recompute_method"], recompute["recompute_num_layers"]) == (
        "full", "uniform", 1,
    )
    assert (megatron["tensor_model_parallel_size"], megatron["expert_model_parallel_size"]) == (2, 8)
    assert megatron["param_offload"] and megatron["optimizer_offload"]
    off = resolved(verl_config(spec, tmp_path, gradient_checkpointing=False))["actor_rollout_ref"]["actor"]
    assert off["megatron"]["override_transformer_config"]["recompute_granularity"] is None


def test_fsdp_takes_context_and_offload_and_refuses_other_sizes(tmp_path: Path) -> None:
    spec = load("mini-swe-agent-local.yaml", *VERL_QUICKSTART)
    cfg = resolved(verl_config(spec, tmp_path, parallel={"context": 2}, offload={"params": True}))
    actor = cfg["actor_rollout_ref"]["actor"]
    assert actor["fsdp_config"]["ulysses_sequence_parallel_size"] == 2
    assert actor["fsdp_config"]["param_offload"] and not actor["fsdp_config"]["optimizer_offload"]
    assert cfg["actor_rollout_ref"]["model"]["enable_gradient_checkpointing"] is True
    errors = errors_of(spec, tmp_path, parallel={"tensor": 2})
    assert "fsdp" in errors["trainer.options.parallel.tensor"]


def test_sizes_that_do_not_divide_the_gpus_and_zero_replicas_are_refused(tmp_path: Path) -> None:
    spec = load("claude-code-swe.yaml")
    errors = errors_of(spec, tmp_path, parallel={"tensor": 3})
    assert "does not divide" in errors["trainer.options.parallel"]
    one = load("mini-swe-agent-local.yaml", *VERL_QUICKSTART)
    errors = errors_of(one, tmp_path, gpus_per_node=1)  # verl's default rollout tensor size 2
    assert "0 replica(s)" in errors["inference.options.tensor_parallel_size"]
    fixed = load("mini-swe-agent-local.yaml", *VERL_QUICKSTART, "inference.options.tensor_parallel_size=1")
    assert resolved(verl_config(fixed, tmp_path, gpus_per_node=1))["actor_rollout_ref"]["rollout"][
        "tensor_model_parallel_size"
    ] == 1


# ---------------------------------------------------------------- several nodes

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:50 / /shared rw,relatime shared:20 - nfs4 server:/export rw
41 22 0:51 / /scratch\\040space rw - lustre 10.0.0.1@tcp:/fs rw
42 22 0:52 / /mnt/bucket rw - fuse.someblob blob rw
"""


def test_mountinfo_gives_each_paths_filesystem() -> None:
    table = mounts(MOUNTINFO)
    assert fs_type(Path("/shared/runs/x"), table) == "nfs4"
    assert fs_type(Path("/scratch space/data"), table) == "lustre"
    assert fs_type(Path("/sharedother"), table) == "ext4"  # a prefix of a name is not a parent
    assert [sharing(t) for t in ("nfs4", "ext4", "fuse.juicefs", "fuse.someblob")] == [
        "shared", "local", "shared", "unknown",
    ]


def test_several_nodes_need_the_run_directory_shared(tmp_path: Path) -> None:
    data = tmp_path / "tasks.jsonl"
    data.write_text("{}\n")
    table = [("/", "ext4"), (str(tmp_path), "nfs4")]
    assert shared_path_problems(1, Path("/local/run"), tmp_path, {}, table) == []
    problems = shared_path_problems(4, Path("/local/run"), tmp_path, {"instances": "tasks.jsonl"}, table)
    fatal = [p for p in problems if p.fatal]
    assert len(fatal) == 1 and "run directory /local/run" in fatal[0].message and "ext4" in fatal[0].message
    assert not any("task data" in p.message for p in problems)  # on the nfs mount
    shared = shared_path_problems(4, tmp_path / "run", tmp_path, {"instances": "tasks.jsonl"}, table)
    assert not [p for p in shared if p.fatal]
    assert [p for p in shared if "Python environment" in p.message]  # the venv is on "/" (ext4)
    elsewhere = shared_path_problems(4, tmp_path / "run", Path("/"), {"instances": str(data)}, [("/", "ext4")])
    assert any("task data" in p.message and not p.fatal for p in elsewhere)
