"""The GPU stack's two lock files (gpu/): exact pins only, kept equal to what the plugins'
preflight names, and `legorl plan` naming the environment each piece of a verl + vLLM spec
needs. (That each lock resolves to itself on PyPI is `python gpu/lock.py --check`: tests reach
loopback only.)"""

from __future__ import annotations

import importlib.util
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from lego_rl import hookimpl
from lego_rl.cli.readiness import check
from lego_rl.kinds import Problem
from lego_rl.registry import BuildContext, Registry, default_registry
from lego_rl.spec.resolve import load_and_resolve

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "specs"
_spec = importlib.util.spec_from_file_location("gpu_lock", REPO / "gpu" / "lock.py")
lock = sys.modules.setdefault("gpu_lock", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(lock)  # type: ignore[union-attr]

ENVS = list(lock.ENVIRONMENTS.values())
OPTIONS = {"--only-binary :all:"}
"""pip options a lock may carry besides --no-binary of a pinned pure-Python sdist."""


def requirement_lines(path: Path) -> list[str]:
    return [s for line in path.read_text().splitlines() if (s := line.strip()) and not s.startswith("#")]


def project_requirement(pyproject: Path, name: str) -> Requirement:
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return next(r for d in deps if (r := Requirement(d)).name == name)


# ---------------------------------------------------------------- the lock files themselves


@pytest.mark.parametrize("env", ENVS, ids=lambda e: e.name)
def test_every_line_is_an_exact_pin_and_nothing_of_this_machine(env: Any) -> None:
    pins = lock.pins(env.lock)
    for line in requirement_lines(env.lock):
        if line.startswith("--no-binary "):
            assert line.split()[1] in pins, f"{line}: not a pinned package"
        elif line.startswith("-"):
            assert line in OPTIONS, f"{env.lock.name}: option {line!r} (no index, find-links or constraint)"
        else:
            assert lock._PIN.match(line), f"{env.lock.name}: {line!r} is not name==version"
    assert "torch" in pins and "vllm" in pins
    # the header (what it is, the install line, the post-install steps, pip's options) is current
    text = env.lock.read_text().splitlines()
    assert text[: len(lock.header(env))] == lock.header(env)
    # every requirement of the .in is met by the lock (an edited .in needs `python gpu/lock.py`)
    for line in requirement_lines(env.source):
        if not line.startswith("-"):
            req = Requirement(line)
            assert req.specifier.contains(pins[lock.canonical(req.name)]), f"{line} vs the lock"


def test_the_two_environments_cannot_be_one() -> None:
    """Why two: vLLM 0.33's transformers is past what verl and legorl-embedded accept, and the
    two torch pins differ (verl's vllm extra pins torch 2.11.0, vLLM 0.33 torch 2.14.0)."""
    train, vllm = lock.pins(lock.TRAIN.lock), lock.pins(lock.VLLM.lock)
    for plugin in ("legorl-verl", "legorl-embedded"):
        allowed = project_requirement(REPO / "plugins" / plugin / "pyproject.toml", "transformers")
        assert allowed.specifier.contains(train["transformers"])
        assert not allowed.specifier.contains(vllm["transformers"]), plugin
    assert Version(vllm["vllm"]) >= Version("0.33")  # what legorl-vllm's HTTP API targets
    assert train["torch"] != vllm["torch"]


def test_the_plugins_name_their_lock_as_it_is() -> None:
    from legorl_verl import environment as verl_env
    from legorl_vllm import server as vllm_server

    train = lock.pins(lock.TRAIN.lock)
    assert verl_env.PINS == {name: train[name] for name in verl_env.PINS}
    assert REPO / verl_env.LOCK == lock.TRAIN.lock
    assert verl_env.INSTALL == f"python3.12 -m venv .venv-train && {lock.TRAIN.install('.venv-train/bin/pip')}"
    for _module, step in verl_env.CUDA_BUILDS.values():
        assert any(s.startswith(step.removeprefix("pip ")) for s in lock.TRAIN.post_install), step
    assert REPO / vllm_server.LOCK == lock.VLLM.lock
    assert vllm_server.VLLM_VERSION == lock.pins(lock.VLLM.lock)["vllm"]
    assert vllm_server.INSTALL == f"python3.12 -m venv .venv-vllm && {lock.VLLM.install('.venv-vllm/bin/pip')}"


def test_the_resolver_sees_no_pip_configuration_of_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_CONSTRAINT", "/etc/xdg/pip/constraints.txt")
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setenv("PIP_CERT", "/etc/ssl/certs/ca-certificates.crt")
    env = lock.resolver_env()
    assert env["PIP_CONFIG_FILE"] == os.devnull
    assert "PIP_CONSTRAINT" not in env and "PIP_FIND_LINKS" not in env
    assert env["PIP_CERT"] == "/etc/ssl/certs/ca-certificates.crt"  # how to reach PyPI stays


# ---------------------------------------------------------------- what `legorl plan` says


def findings(spec: str, *overrides: str) -> list[Any]:
    reg = default_registry()
    path = SPECS / spec
    return check(load_and_resolve(path, reg, list(overrides)), reg, path).findings


VERL_VLLM = ("trainer.plugin=verl", "trainer.options={}", "inference.plugin=vllm", "model.path=/models/tiny")


def test_plan_names_the_training_environment_for_verl_and_its_vllm() -> None:
    pytest.importorskip("verl")
    pytest.importorskip("legorl_vllm")
    from legorl_verl import environment as verl_env

    got = findings("mini-swe-agent-local.yaml", *VERL_VLLM)
    inference = [f for f in got if f.path == "inference"]
    # verl serves with its own vLLM: the launcher's checks (`vllm` on PATH, ...) do not apply
    assert [(f.fatal, "trainer 'verl'" in f.message) for f in inference] == [(False, True)]
    trainer = [f for f in got if f.path == "trainer"]
    assert all(not f.fatal for f in trainer), trainer
    differs = verl_env.differences()
    named = [f for f in trainer if "need the training environment gpu/requirements-train.txt" in f.message]
    if differs:  # a machine without the training environment (this one: no vllm, another torch)
        assert len(named) == 1 and named[0].needs_gpu
        assert "inference vllm" in named[0].message
        assert all(d in named[0].message for d in differs)
        assert "pip install -r gpu/requirements-train.txt -e ." in named[0].fix
    else:
        assert named == []
    built = [f for f in trainer if "a CUDA build outside gpu/requirements-train.txt" in f.message]
    if importlib.util.find_spec("flash_attn") is None:  # strategy fsdp (the default) imports it
        assert len(built) == 1 and "flash-attn==2.8.3" in built[0].fix
    else:
        assert built == []


def test_a_training_environment_as_pinned_is_not_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    from legorl_verl import environment as verl_env

    monkeypatch.setattr(verl_env.metadata, "version", lambda name: verl_env.PINS[name])
    assert verl_env.differences() == []
    monkeypatch.setattr(verl_env.importlib.util, "find_spec", lambda name: object())
    assert verl_env.problems("megatron") == [] and verl_env.problems("fsdp") == []

    monkeypatch.setattr(verl_env.metadata, "version", lambda name: "0.0" if name == "vllm" else verl_env.PINS[name])
    [problem] = verl_env.problems("fsdp")
    assert "vllm 0.0 (pinned 0.24.0)" in problem.message and not problem.fatal


def test_a_missing_cuda_build_is_named_with_its_install_step(monkeypatch: pytest.MonkeyPatch) -> None:
    from legorl_verl import environment as verl_env

    monkeypatch.setattr(verl_env.metadata, "version", lambda name: verl_env.PINS[name])
    monkeypatch.setattr(verl_env.importlib.util, "find_spec", lambda name: None)
    [problem] = verl_env.problems("fsdp")
    assert "flash_attn" in problem.message and "flash-attn==2.8.3" in problem.fix and not problem.fatal


def test_megatron_without_megatron_bridge_is_pointed_at_mbridge(monkeypatch: pytest.MonkeyPatch) -> None:
    from legorl_verl import environment as verl_env

    monkeypatch.setattr(verl_env.metadata, "version", lambda name: verl_env.PINS[name])
    monkeypatch.setattr(verl_env, "_has", lambda module: module != "megatron.bridge")
    [problem] = verl_env.problems("megatron")
    assert "Megatron-Bridge" in problem.message and verl_env.VANILLA_MBRIDGE in problem.fix
    assert verl_env.problems("megatron", {verl_env.VANILLA_MBRIDGE: True}) == []
    assert verl_env.problems("fsdp") == []  # FSDP builds no Megatron model


def test_plan_names_vllms_own_environment_when_lego_rl_launches_it() -> None:
    pytest.importorskip("legorl_vllm")
    got = findings("quickstart.yaml", "inference.plugin=vllm", "inference.options.executable=/nonexistent/vllm")
    [missing] = [f for f in got if f.path == "inference" and "not on PATH" in f.message]
    assert missing.fatal and missing.needs_gpu  # nothing can serve the policy: apply refuses
    assert "gpu/requirements-vllm.txt" in missing.fix
    assert "pip install -r gpu/requirements-vllm.txt" in missing.fix
    assert "inference.options.executable" in missing.fix


class _Component:
    def __init__(self, options: Any, ctx: BuildContext):
        pass

    def preflight(self) -> list[Problem]:
        return []


class _RolloutOwner(_Component):
    owns_rollout = True


class _Launcher:
    def __init__(self, options: Any, ctx: BuildContext):
        raise AssertionError("built although the trainer owns the rollout")


class _Plugins:
    @hookimpl
    def legorl_register_tasks(self, register: Any) -> None:
        register("t", _Component)

    @hookimpl
    def legorl_register_sandbox(self, register: Any) -> None:
        register("t", _Component)

    @hookimpl
    def legorl_register_harness(self, register: Any) -> None:
        register("t", _Component)

    @hookimpl
    def legorl_register_dialect(self, register: Any) -> None:
        register("t", _Component)

    @hookimpl
    def legorl_register_verifier(self, register: Any) -> None:
        register("t", _Component)

    @hookimpl
    def legorl_register_filter(self, register: Any) -> None:
        register("t", _Component)

    @hookimpl
    def legorl_register_optimizer(self, register: Any) -> None:
        register("t", _Component)

    @hookimpl
    def legorl_register_inference(self, register: Any) -> None:
        register("launcher", _Launcher)

    @hookimpl
    def legorl_register_trainer(self, register: Any) -> None:
        register("owner", _RolloutOwner)
        register("plain", _Component)

    @hookimpl
    def legorl_register_observer(self, register: Any) -> None:
        register("t", _Component)


def test_readiness_checks_no_inference_that_the_trainer_serves_itself(tmp_path: Path) -> None:
    import yaml

    blocks = ("tasks", "sandbox", "harness", "dialect", "verifier", "filter", "optimizer")
    spec = {"model": {"name": "m"}, "run": {"steps": 1, "output_dir": str(tmp_path)},
            **{b: {"plugin": "t"} for b in blocks}, "observer": [{"plugin": "t"}],
            "inference": {"plugin": "launcher"}, "trainer": {"plugin": "owner"}}  # fmt: skip
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    reg = Registry()
    reg.add_module(_Plugins(), name="t-plugins", distribution="t", version="1")
    readiness = check(load_and_resolve(path, reg, []), reg, path)
    [owned] = readiness.findings
    assert (owned.path, owned.fatal, readiness.ready) == ("inference", False, True)
    assert "trainer 'owner'" in owned.message
    # a trainer that does not own it: the inference is built and checked as apply builds it
    plain = check(load_and_resolve(path, reg, ["trainer.plugin=plain"]), reg, path)
    assert not plain.ready and "could not be built" in plain.findings[0].message
