"""Warm start: demonstrations recorded through the real harness, then a supervised pass.

Each demonstration is one trial of the spec's harness on one of its tasks, driven by the
``scripted`` policy with the task's oracle commands (``[metadata] oracle_commands`` in its
task.toml) turned into the harness's own tool calls; only trials the verifier rewards are
kept. With ``describe_share``, each oracle trial's first prompt is also answered by a reply
that only names the fix's commands as text (the harness's first request does not depend on
the reply, so no trial is needed), weighted so that that share of the first replies describe:
the warm-started policy then knows the fix but often does not act, and RL has to learn from
the verifier that running it pays. With ``verify_share``, that share of the demonstrations on
tasks offering candidate fixes and a check command try a drawn candidate, run the check, and
correct a wrong one (:func:`demonstration_commands`): the policy knows both ways, and RL
learns from the verifier that checking pays. The proxy records each call's prompt ids (the harness's
real requests, rendered by the chat template) and the oracle reply's ids; the trainer plugin's ``supervise`` fits the policy
to those replies. The checkpoint is cached under ``output_dir/warmstart/<key>``, the key a
hash of everything that shapes it, so a rerun of the same spec reuses it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lego_rl.data import Sampling, Termination, TrialResult
from lego_rl.engine.scripted import scripted_trial
from lego_rl.kinds import Harness, ScriptsConformance, Supervises, Task
from lego_rl.registry import BuildContext, Registry
from lego_rl.spec.models import Spec
from lego_rl.spec.resolve import Resolved

DONE = "warmstart.json"
"""Written last into the checkpoint directory: its presence means the checkpoint is complete."""


class WarmstartError(RuntimeError):
    """The warm start cannot run; the message says what to change."""


@dataclass
class Demonstration:
    """One model call of an oracle trial: the prompt the harness sent, the reply to learn."""

    task: str
    prompt_ids: list[int]
    completion_ids: list[int]
    turn: int = 0
    """The call's place in its trial."""
    weight: float = 1.0
    """The reply's weight in the supervised loss."""


def warmstart_key(spec: Spec, tasks: list[Task]) -> str:
    """A hash of what shapes the warm-started weights: model, warm start, tasks (their
    instructions and oracles, so a changed task generator never reuses stale weights), harness,
    seed. Of the trainer only the plugin counts: its options (the RL learning rate...) do not
    shape the supervised pass, so tuning them reuses the checkpoint."""
    shaping = {
        "model": spec.model.model_dump(mode="json", exclude={"path"}),
        "blocks": {k: getattr(spec, k).model_dump(mode="json") for k in ("tasks", "harness", "dialect")},
        "trainer": spec.trainer.plugin,
        "tasks": [[t.name, t.instruction, t.oracle_commands] for t in tasks],
        "seed": spec.run.seed,
    }
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:16]


def warmstart_root(spec: Spec) -> Path:
    """``output_dir/warmstart`` (beside the run directories, resolved as they are): the
    checkpoints, one per key, and the tasks they were built from."""
    return (spec.run.output_dir / "warmstart").resolve()


def checkpoint_dir(spec: Spec, tasks: list[Task]) -> Path:
    return warmstart_root(spec) / warmstart_key(spec, tasks)


def cached(spec: Spec, tasks: list[Task]) -> Path | None:
    """The finished checkpoint of this spec's warm start on these tasks, if there is one."""
    path = checkpoint_dir(spec, tasks)
    return path if (path / DONE).is_file() else None


def warmstart(
    resolved: Resolved,
    registry: Registry,
    spec_path: Path,
    log: Callable[[str], None] = print,
) -> Path:
    """The warm-started checkpoint of the spec: cached, or recorded and trained now."""
    spec = resolved.spec
    plan = spec.model.warmstart
    if plan is None:
        raise WarmstartError("the spec has no model.warmstart block")
    spec_dir = spec_path.resolve().parent
    task_ctx = BuildContext(spec=spec, run_dir=warmstart_root(spec), spec_dir=spec_dir)
    tasks = demonstration_tasks(resolved, registry, task_ctx)
    if (done := cached(spec, tasks)) is not None:
        log(f"warm start: reusing {done}")
        return done
    target = checkpoint_dir(spec, tasks)
    ctx = BuildContext(spec=spec, run_dir=target / "demos", spec_dir=spec_dir)

    def build(block_path: str) -> Any:
        block = resolved.block(block_path)
        return registry.build(block.kind, block.block.plugin, block.options, ctx)

    trainer = build("trainer")
    if not isinstance(trainer, Supervises):
        raise WarmstartError(
            f"trainer plugin {spec.trainer.plugin!r} has no supervise(); remove model.warmstart "
            "or use a trainer that can warm-start (embedded)"
        )
    demos, results = record_demonstrations(resolved, registry, ctx, build, tasks, plan.demos)
    rewarded = sum(r.reward == 1.0 for r in results)
    described = describe_demonstrations(registry, ctx, demos, tasks, plan.describe_share, spec.run.max_tokens)
    demos += described
    log(
        f"warm start: {rewarded}/{len(results)} oracle trials rewarded, {len(demos)} calls to learn from"
        + (f" ({len(described)} describing the fix)" if described else "")
    )
    if not demos:
        reasons = sorted({f"{r.termination.value}: {r.reason[:200]}" for r in results})
        raise WarmstartError("no oracle trial was rewarded, nothing to learn from: " + "; ".join(reasons))
    target.mkdir(parents=True, exist_ok=True)
    (target / "demos.jsonl").write_text("".join(json.dumps(asdict(d)) + "\n" for d in demos))
    metrics = trainer.supervise(demos, plan, target, log)
    summary = {"demos": len(demos), "trials": len(results), "rewarded": rewarded, "described": len(described), **metrics}
    (target / DONE).write_text(json.dumps(summary, indent=2) + "\n")
    return target


def demonstration_tasks(resolved: Resolved, registry: Registry, ctx: BuildContext) -> list[Task]:
    """The tasks the warm start demonstrates: the spec's task source, with
    ``model.warmstart.task_options`` merged over its options (e.g. another seed, so that RL
    trains on tasks the warm start never saw)."""
    plan = resolved.spec.model.warmstart
    source = resolved.block("tasks")
    options = {**source.block.options, **(plan.task_options if plan else {})}
    try:
        return registry.build(source.kind, source.block.plugin, options, ctx).tasks()
    except ValidationError as exc:
        raise WarmstartError(
            f"model.warmstart.task_options: {source.block.plugin!r} refuses the merged options: {exc}"
        ) from exc


def record_demonstrations(
    resolved: Resolved,
    registry: Registry,
    ctx: BuildContext,
    build: Callable[[str], Any],
    source_tasks: list[Task],
    count: int,
) -> tuple[list[Demonstration], list[TrialResult]]:
    """Run ``count`` oracle trials (the tasks with oracle commands, cycled) through the
    harness, ``run.concurrency`` at a time; the calls of the rewarded ones."""
    spec = resolved.spec
    tasks = [t for t in source_tasks if t.oracle_commands]
    if not tasks:
        raise WarmstartError(
            "no task of the spec has oracle commands ([metadata] oracle_commands or oracle_command "
            "in task.toml); "
            "the warm start needs them to demonstrate"
        )
    harness: Harness = build("harness")
    if not isinstance(harness, ScriptsConformance):
        raise WarmstartError(f"harness {spec.harness.plugin!r} has no conformance_script(), so it cannot be scripted")
    sandbox, verifier = build("sandbox"), build("verifier")
    anticheat = [build(f"anticheat.{i}") for i in range(len(spec.anticheat))]

    warm = spec.model.warmstart
    verify_share, order = (warm.verify_share, warm.verify_order) if warm else (0.0, "drawn")

    def one(index: int) -> tuple[TrialResult, list[Demonstration]]:
        task = tasks[index % len(tasks)]
        turns = harness.conformance_script(demonstration_commands(task, index, verify_share, spec.run.seed, order))
        inference = registry.build("inference", "scripted", {"turns": turns}, ctx)
        result, calls = scripted_trial(
            harness=harness, sandbox=sandbox, verifier=verifier, inference=inference,
            dialect=build("dialect"), model=spec.model, task=task, trial_id=f"demo-{index:05d}",
            turns=len(turns), max_tokens=spec.run.max_tokens, anticheat=anticheat,
        )  # fmt: skip
        if result.reward != 1.0 or result.termination != Termination.COMPLETED:
            return result, []
        return result, [
            Demonstration(task.name, list(c.prompt_ids), list(c.completion_ids), turn)
            for turn, c in enumerate(calls)
            if c.error is None and c.completion_ids
        ]

    with ThreadPoolExecutor(max_workers=spec.run.concurrency) as pool:
        outcomes = list(pool.map(one, range(count)))
    return [d for _, demos in outcomes for d in demos], [r for r, _ in outcomes]


def demonstration_commands(
    task: Task, index: int, verify_share: float, seed: int = 0, order: str = "drawn"
) -> list[str]:
    """The shell commands of demonstration ``index`` on ``task``: the oracle's, or (a
    ``verify_share`` of the demonstrations, on tasks with candidate fixes and a check command)
    candidates each followed by the check, up to the right one: with ``order`` ``drawn`` a
    drawn candidate and after a wrong one the oracle's, with ``listed`` the candidates in the
    task's order."""
    check, candidates, oracle = task.check_command, task.candidate_commands, task.oracle_commands
    rng = random.Random(f"warmstart:{seed}:{task.name}:{index}")
    if not (check and candidates and oracle) or rng.random() >= verify_share:
        return oracle
    if order == "listed":
        wrong = list(itertools.takewhile(lambda c: c not in oracle, candidates))
    else:
        first = rng.choice(candidates)
        wrong = [] if first in oracle else [first]
    return [*(step for command in wrong for step in (command, check)), *oracle, check]


def describe_demonstrations(
    registry: Registry,
    ctx: BuildContext,
    demos: list[Demonstration],
    tasks: list[Task],
    share: float,
    max_tokens: int,
) -> list[Demonstration]:
    """Each oracle trial's first prompt answered by :func:`describe_turns` (through the
    ``scripted`` backend, as a trial's call would be), weighted ``share / (1 - share)`` against
    the oracle's first reply of weight 1; none when ``share`` is 0."""
    if share <= 0:
        return []
    commands = {t.name: t.oracle_commands for t in tasks}
    firsts = [d for d in demos if d.turn == 0]
    script = {"turns": [turn for d in firsts for turn in describe_turns(commands[d.task])]}
    backend = registry.build("inference", "scripted", script, ctx)  # answers its turns in order
    replies = [backend.generate(d.prompt_ids, Sampling(max_tokens=max_tokens)) for d in firsts]
    weight = share / (1 - share)
    return [
        Demonstration(d.task, d.prompt_ids, list(r.completion_ids), 0, weight)
        for d, r in zip(firsts, replies, strict=True)
    ]


def describe_turns(commands: list[str]) -> list[dict[str, Any]]:
    """One scripted reply that names the fix's commands as text and runs none of them."""
    return [{"text": "The fix: " + "; ".join(f"`{c}`" for c in commands)}]


def with_warmstart(
    resolved: Resolved, registry: Registry, spec_path: Path, log: Callable[[str], None] = print
) -> Resolved:
    """``resolved`` with ``model.path`` set to its warm start (run now unless cached) when the
    spec asks for one and names no checkpoint itself; unchanged otherwise."""
    model = resolved.spec.model
    if model.warmstart is None or model.path:
        return resolved
    path = warmstart(resolved, registry, spec_path, log)
    spec = resolved.spec.model_copy(update={"model": model.model_copy(update={"path": str(path)})})
    return Resolved(spec=spec, blocks=resolved.blocks)
