"""Warm start: oracle demonstrations recorded through a real harness, a supervised pass that
fits the policy to them, a cached checkpoint that `legorl apply` starts from."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from lego_rl.engine.warmstart import (
    Demonstration,
    WarmstartError,
    cached,
    demonstration_tasks,
    describe_turns,
    warmstart_key,
    with_warmstart,
)
from lego_rl.kinds import Task
from lego_rl.registry import BuildContext, default_registry
from lego_rl.spec.models import ModelSpec, WarmstartSpec
from lego_rl.spec.resolve import load_and_resolve

REPO = Path(__file__).resolve().parents[1]


def test_oracle_commands_come_from_task_metadata(tmp_path: Path) -> None:
    def task(metadata: dict) -> Task:
        return Task(name="t", path=tmp_path, instruction="x", config={"metadata": metadata})

    assert task({"oracle_commands": ["a", "b"]}).oracle_commands == ["a", "b"]
    assert task({"oracle_command": "sed -i s/a/b/ f.py"}).oracle_commands == ["sed -i s/a/b/ f.py"]
    assert task({"difficulty": "easy"}).oracle_commands == []


def test_warmstart_key_follows_the_tasks_content(tmp_path: Path) -> None:
    registry = default_registry()
    spec = load_and_resolve(REPO / "specs" / "quickstart.yaml", registry, []).spec

    def task(instruction: str, oracle: str = "sed -i s/a/b/ /app/m.py") -> Task:
        return Task(name="t", path=tmp_path, instruction=instruction, config={"metadata": {"oracle_command": oracle}})

    key = warmstart_key(spec, [task("fix it")])
    assert key == warmstart_key(spec, [task("fix it")])
    assert key != warmstart_key(spec, [task("fix it, please")])  # a new generator's text: new weights
    assert key != warmstart_key(spec, [task("fix it", "sed -i s/a/c/ /app/m.py")])
    retuned = load_and_resolve(REPO / "specs" / "quickstart.yaml", registry, ["trainer.options.lr=5e-5"]).spec
    assert warmstart_key(retuned, [task("fix it")]) == key  # the RL learning rate does not shape it
    resized = load_and_resolve(REPO / "specs" / "quickstart.yaml", registry, ["model.config.hidden_size=64"]).spec
    assert warmstart_key(resized, [task("fix it")]) != key


def test_demonstrations_can_come_from_other_tasks_than_rl(tmp_path: Path) -> None:
    registry = default_registry()
    spec = REPO / "specs" / "quickstart.yaml"
    ctx = BuildContext(run_dir=tmp_path, spec_dir=spec.parent)
    plain = load_and_resolve(spec, registry, ["model.warmstart.task_options={}"])
    other = load_and_resolve(spec, registry, ["model.warmstart.task_options={seed: 7}"])
    rl = {t.instruction for t in registry.build("tasks", "bugfix", plain.block("tasks").options, ctx).tasks()}
    assert {t.instruction for t in demonstration_tasks(plain, registry, ctx)} == rl
    demos = {t.instruction for t in demonstration_tasks(other, registry, ctx)}
    assert len(demos & rl) < len(rl) // 4  # another draw: mostly other tasks
    bad = load_and_resolve(spec, registry, ["model.warmstart.task_options={seed: nope}"])
    with pytest.raises(WarmstartError, match="model.warmstart.task_options"):
        demonstration_tasks(bad, registry, ctx)


def test_packing_keeps_replies_as_the_only_trained_positions() -> None:
    from legorl_embedded.training.supervise import pack

    demos = [Demonstration("t", [1, 2, 3], [4, 5]), Demonstration("t", [1], [6]), Demonstration("t", [7], [])]
    batches = pack(demos, batch_tokens=8)
    rows = [
        (ids[i][att[i].bool()].tolist(), ids[i][reply[i]].tolist(), float(weight[i]))
        for ids, att, reply, weight in batches
        for i in range(len(ids))
    ]
    assert sorted(rows) == [([1, 2, 3, 4, 5], [4, 5], 1.0), ([1, 6], [6], 1.0)]
    assert all(ids.numel() <= 8 or len(ids) == 1 for ids, _, _, _ in batches)
    [[_, _, _, weight]] = pack([Demonstration("t", [1], [2], weight=3.0)], batch_tokens=8)
    assert weight.tolist() == [3.0]


def test_supervised_pass_makes_the_replies_likelier() -> None:
    from legorl_embedded.policy.logprobs import token_logprobs
    from legorl_embedded.policy.model import build_model
    from legorl_embedded.policy.tokenizer import load_tokenizer, vocab_size
    from legorl_embedded.training.supervise import pack, supervise_model

    tokenizer = load_tokenizer()
    model = build_model(ModelSpec(name="tiny", max_context=256), tokenizer, seed=0).float()
    prompt = tokenizer.encode("fix the bug in calc.py", add_special_tokens=False)
    demos = [Demonstration("t", prompt, tokenizer.encode("sed -i s/-/+/ calc.py", add_special_tokens=False))] * 4

    def nll() -> float:
        ids, attention, reply, _ = pack(demos[:1], 4096)[0]
        with torch.no_grad():
            return float(-token_logprobs(model, ids, attention, where=reply, vocab=vocab_size(tokenizer)).sum())

    before = nll()
    metrics = supervise_model(model, demos, WarmstartSpec(epochs=12, lr=3e-3), vocab=vocab_size(tokenizer), seed=0, log=lambda line: None)
    assert nll() < before * 0.8
    assert metrics["nll_last_epoch"] < metrics["nll_first_epoch"]


@pytest.mark.slow
def test_codex_demonstrations_warm_start_a_cached_checkpoint(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    shutil.copy(REPO / "specs" / "codex-local.yaml", spec)
    shutil.copytree(REPO / "tasks" / "quickstart", tmp_path / "tasks" / "quickstart")
    overrides = [
        "tasks.options.path=tasks/quickstart",
        "model.warmstart={demos: 2, epochs: 2, lr: 0.003, describe_share: 0.75}",
        "run.max_tokens=256",
        f"run.output_dir={tmp_path / 'runs'}",
    ]
    registry = default_registry()
    resolved = load_and_resolve(spec, registry, overrides)
    lines: list[str] = []

    warmed = with_warmstart(resolved, registry, spec, log=lines.append)

    path = Path(str(warmed.spec.model.path))
    summary = json.loads((path / "warmstart.json").read_text())
    assert summary["trials"] == 2 and summary["rewarded"] == 2 and summary["described"] == 2, lines
    assert summary["demos"] == 6  # each oracle trial: the tool call, the final answer, a description
    assert summary["nll_last_epoch"] < summary["nll_first_epoch"]
    assert (path / "config.json").is_file() and (path / "model.safetensors").is_file()
    demos = [json.loads(line) for line in (path / "demos.jsonl").read_text().splitlines()]
    assert all(d["prompt_ids"] and d["completion_ids"] for d in demos)
    from legorl_embedded.policy.tokenizer import load_tokenizer

    tokenizer = load_tokenizer()
    described = [d for d in demos if d["weight"] != 1.0]
    assert [d["weight"] for d in described] == [3.0, 3.0]  # 0.75 of the first replies' weight
    assert all(tokenizer.decode(d["completion_ids"]).startswith("The fix: `sed -i") for d in described)
    first = [d["prompt_ids"] for d in demos if d["turn"] == 0 and d["weight"] == 1.0]
    assert sorted(d["prompt_ids"] for d in described) == sorted(first)  # the harness's first prompts
    tasks = registry.build("tasks", "harbor-dir", resolved.block("tasks").options, BuildContext(spec_dir=tmp_path))
    assert cached(resolved.spec, tasks.tasks()) == path
    again: list[str] = []
    assert with_warmstart(resolved, registry, spec, log=again.append).spec.model.path == str(path)
    assert again == [f"warm start: reusing {path}"]


def test_a_description_names_every_command() -> None:
    assert describe_turns(["sed -i s/a/b/ m.py", "true"]) == [{"text": "The fix: `sed -i s/a/b/ m.py`; `true`"}]


def test_weights_set_how_often_the_fitted_policy_gives_each_reply() -> None:
    from legorl_embedded.policy.logprobs import token_logprobs
    from legorl_embedded.policy.model import build_model
    from legorl_embedded.policy.tokenizer import load_tokenizer
    from legorl_embedded.training.supervise import supervise_model

    tokenizer = load_tokenizer()
    model = build_model(ModelSpec(name="tiny", max_context=256), tokenizer, seed=0).float()
    prompt = tokenizer.encode("fix the bug in calc.py", add_special_tokens=False)
    act, say, emitted = [1000], [2000], 4096  # replies of one token; a head cut to 4096 ids
    demos = [Demonstration("t", prompt, act), Demonstration("t", prompt, say, weight=3.0)]
    plan = WarmstartSpec(epochs=30, lr=2e-2, lr_floor=1.0, batch_tokens=4096)
    supervise_model(model, demos, plan, vocab=emitted, seed=0, log=lambda _: None)
    ids = torch.tensor([prompt + act, prompt + say])
    with torch.no_grad():
        logprobs = token_logprobs(model, ids, torch.ones_like(ids), vocab=emitted)[:, -1]
    p_act, p_say = logprobs.exp().tolist()
    assert p_say / p_act == pytest.approx(3.0, rel=0.2) and p_act + p_say > 0.9


def test_the_supervised_rate_warms_up_then_settles_to_its_floor() -> None:
    from legorl_embedded.training.supervise import warmup_cosine

    factors = [warmup_cosine(step, steps=100, floor=0.1) for step in range(100)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    after = factors[9:]
    assert all(a >= b for a, b in zip(after, after[1:], strict=False)), "no rise after the warm-up"
    assert factors[-1] == pytest.approx(0.1, abs=1e-3) and factors[55] == pytest.approx(0.55, abs=0.01)
    assert {warmup_cosine(step, steps=100, floor=1.0) for step in range(10, 100)} == {1.0}
