"""scripts/gpu-check.sh on a CPU: its two steps' overrides (the arrays of scripts/gpu-check.args,
which the script sources) pass `legorl plan` on a tiny checkpoint built as the script builds it,
but for what needs a GPU or the vLLM environment; and the script itself, with no GPU, runs the
parts it can and ends with one JSON line."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lego_rl.cli.plan import plan_data, plugin_details
from lego_rl.cli.readiness import check
from lego_rl.registry import default_registry
from lego_rl.spec.load import load_spec
from lego_rl.spec.resolve import load_and_resolve

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu-check.sh"
ARGS = ROOT / "scripts" / "gpu-check.args"


def sourced(name: str, out: Path, model: Path, vllm: str) -> list[str]:
    """The bash array (or variable) ``name`` of scripts/gpu-check.args, with OUT, MODEL and VLLM
    set as the script sets them (``set -u``: the file may use nothing else)."""
    env = {**os.environ, "OUT": str(out), "MODEL": str(model), "VLLM": vllm}
    command = f'set -eu; source scripts/gpu-check.args; printf "%s\\0" "${{{name}[@]}}"'
    got = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, check=True)
    return got.stdout.decode().split("\0")[:-1]


def vllm_executable() -> str:
    """The vllm the script launches: .venv-vllm's, else one on PATH, else .venv-vllm's path."""
    venv = ROOT / ".venv-vllm" / "bin" / "vllm"
    if os.access(venv, os.X_OK):
        return str(venv)
    return shutil.which("vllm") or str(venv)


def gpu_usable() -> bool:
    import torch

    return torch.cuda.is_available()


def expected_vllm_fatal() -> list[tuple[str, str]]:
    """(block, words of the message) of the fatal findings step 1 has here: only what needs a
    GPU or vLLM's own environment."""
    expected = []
    if shutil.which(vllm_executable()) is None:
        expected.append(("inference", "is not on PATH"))
    if not gpu_usable():
        expected.append(("trainer", "trainer.options.device is 'cuda' but this machine has no usable GPU"))
    return expected


@pytest.fixture(scope="module")
def step(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """step(NAME) -> (spec path, the array NAME), on a tiny checkpoint saved as the script saves it."""
    from legorl_embedded.policy.model import build_from_config, save_checkpoint
    from legorl_embedded.policy.tokenizer import load_tokenizer

    out = tmp_path_factory.mktemp("gpu-check")
    model_dir = out / "tiny-qwen3-moe"

    def args(name: str) -> tuple[Path, list[str]]:
        [spec] = sourced("GPU_CHECK_SPEC", out, model_dir, vllm_executable())
        return ROOT / spec, sourced(name, out, model_dir, vllm_executable())

    spec, model_args = args("MODEL_ARGS")
    model = load_spec(spec, model_args).model
    tokenizer = load_tokenizer(model.tokenizer, model.chat_template)
    save_checkpoint(build_from_config(model, tokenizer), tokenizer, model_dir)
    assert "output_vocab" not in json.loads((model_dir / "config.json").read_text())
    return args


def plan(spec: Path, overrides: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What `legorl plan --json SPEC OVERRIDES...` prints: the plan and its plugins' details."""
    reg = default_registry()
    resolved = load_and_resolve(spec, reg, overrides)
    return plan_data(spec, check(resolved, reg, spec)), plugin_details(resolved, reg, spec)


def fatal(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in data["preflight"] if f["fatal"]]


def test_the_script_and_its_overrides_are_valid_bash() -> None:
    for path in (SCRIPT, ARGS):
        got = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert got.returncode == 0, got.stderr


def test_the_script_installs_nothing() -> None:
    """A GPU machine may have no network: nothing in the script fetches or installs."""
    for path in (SCRIPT, ARGS):
        code = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
        for word in ("pip ", "pip3 ", "uv ", "curl ", "wget ", "npm ", "apt-get ", "git clone", "hf download", "snapshot_download"):
            assert not [line for line in code if word in line], (path.name, word)
    assert 'export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"' in SCRIPT.read_text()


def test_step_1_vllm_preflight_fails_only_for_the_gpu_and_the_vllm_environment(step: Any) -> None:
    pytest.importorskip("legorl_vllm")
    spec, overrides = step("VLLM_ARGS")
    assert "inference.options.tensor_parallel_size=1" in overrides
    data, _ = plan(spec, overrides)
    assert data["missing"] == []
    assert "output_vocab" not in data["model"]["config"]
    got = fatal(data)
    assert not [f for f in got if "output_vocab" in f["message"] or "replica" in f["message"]], got
    expected = expected_vllm_fatal()
    assert len(got) == len(expected), got
    for f, (path, words) in zip(got, expected, strict=True):
        assert f["path"] == path and words in f["message"] and f["needs_gpu"], f
    assert data["ready"] is (expected == [])


def test_step_1_without_the_model_config_override_is_refused_for_output_vocab(step: Any) -> None:
    """The quickstart's own model.config (output_vocab 8192) is what vLLM refuses: the override
    is what passes it."""
    pytest.importorskip("legorl_vllm")
    spec, overrides = step("VLLM_ARGS")
    kept = [o for o in overrides if not o.startswith("model.config=")]
    assert len(kept) == len(overrides) - 1
    data, _ = plan(spec, kept)
    [refused] = [f for f in fatal(data) if "output_vocab" in f["message"]]
    assert refused["path"] == "inference" and refused["plugin"] == "vllm"


def test_step_2_verl_preflight_is_ready_with_one_rollout_replica_and_routing_replay(step: Any) -> None:
    pytest.importorskip("legorl_verl")
    pytest.importorskip("verl")
    spec, overrides = step("VERL_ARGS")
    data, details = plan(spec, overrides)
    assert data["missing"] == [] and fatal(data) == [], fatal(data)
    assert data["ready"] is True
    messages = [f["message"] for f in data["preflight"]]
    assert not [m for m in messages if "output_vocab" in m or "replica" in m or "Megatron-Bridge" in m], messages
    assert "error" not in details["trainer"], details["trainer"]
    cfg = details["trainer"]["verl config"]
    rollout, actor = cfg["actor_rollout_ref"]["rollout"], cfg["actor_rollout_ref"]["actor"]
    assert (cfg["trainer"]["nnodes"], cfg["trainer"]["n_gpus_per_node"]) == (1, 1)
    assert rollout["name"] == "vllm" and rollout["tensor_model_parallel_size"] == 1
    assert rollout["enable_rollout_routing_replay"] is True
    assert actor["strategy"] == "megatron" and actor["megatron"]["router_replay"]["mode"] == "R3"
    assert actor["megatron"]["vanilla_mbridge"] is True
    # the memory estimate read the tiny checkpoint's config.json
    assert str(Path(data["model"]["path"]) / "config.json") in details["trainer"]["GPU memory per device"]["model"]


def test_step_2_without_tensor_parallel_1_is_refused_for_no_rollout_replica(step: Any) -> None:
    """verl's default rollout tensor size (2) gives no replica on one GPU: the override is what
    passes it."""
    pytest.importorskip("legorl_verl")
    pytest.importorskip("verl")
    spec, overrides = step("VERL_ARGS")
    kept = [o for o in overrides if o != "inference.options.tensor_parallel_size=1"]
    assert len(kept) == len(overrides) - 1
    data, _ = plan(spec, kept)
    [refused] = fatal(data)
    assert refused["path"] == "trainer" and "inference.options.tensor_parallel_size" in refused["message"]
    assert "0 replica(s)" in refused["message"]


@pytest.mark.slow
def test_the_script_without_a_gpu_ends_with_one_json_line(tmp_path: Path) -> None:
    """NVIDIA_SMI=false: as if no GPU were there (also on a GPU machine). The packages, the model
    and both preflights run; both steps are skipped; the last line of stdout is the JSON."""
    env = {**os.environ, "VENV": sys.prefix, "NVIDIA_SMI": "false"}
    got = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "out")], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    lines = got.stdout.splitlines()
    assert lines, got.stderr
    assert [line for line in lines if line.startswith("{")] == [lines[-1]], got.stdout
    result = json.loads(lines[-1])
    assert got.returncode == 1 and result["passed"] is False and result["gpu"] is None
    steps = result["steps"]
    assert list(steps) == ["packages", "tiny-model", "preflight-vllm", "vllm-embedded", "preflight-verl", "verl-megatron"]

    packages = steps["packages"]
    assert packages["ran"] is True
    assert [v["lock"] for v in packages["venvs"]] == ["gpu/requirements-train.txt", "gpu/requirements-vllm.txt"]
    assert packages["venvs"][0]["venv"] == sys.prefix and packages["venvs"][0]["pinned"] > 100
    assert packages["passed"] is all(v["passed"] for v in packages["venvs"])

    assert steps["tiny-model"] == {"ran": True, "passed": True, "path": str(tmp_path / "out" / "tiny-qwen3-moe")}
    for part in ("vllm-embedded", "verl-megatron"):
        assert steps[part] == {"ran": False, "passed": False, "skipped": "no NVIDIA GPU visible (false)"}

    pre = steps["preflight-vllm"]
    expected = expected_vllm_fatal()
    assert pre["ran"] is True and pre["passed"] is (expected == []) and pre["exit"] == (0 if pre["passed"] else 1)
    assert len(pre["fatal"]) == len(expected), pre
    for message, (path, words) in zip(pre["fatal"], expected, strict=True):
        assert message.startswith(f"{path} (") and words in message, message

    pre = steps["preflight-verl"]
    if importlib.util.find_spec("verl") is not None:
        assert pre["ran"] is True and pre["passed"] is True and pre["fatal"] == [], pre
    else:  # the plugin's verl is missing: apply would refuse
        assert pre["ran"] is True and pre["passed"] is False, pre
