"""Trainer contracts that a trainer doing nothing fails: a step on sampled trials with mixed
rewards changes the weights inference samples with, towards the rewarded replies, and a run
killed between steps and resumed from its checkpoint ends with the same weights as one that
ran straight, bit for bit.

The run around the trainer is the kit's own: the first installed inference backend that
passes its preflight (it must offer :class:`~lego_rl.kinds.LoadsWeights` and
:class:`~lego_rl.kinds.ScoresTokens`), the first installed optimizer, every group kept, and a
rollout that samples real tokens from that backend (seeded per trial, so two runs sample the
same given the same weights; each reply is scored as it is sampled). What the weights are is
read two ways: a digest of every state the trainer hands to ``load_weights``, and the backend's
scoring of given replies (those it was trained on, and a fixed one). Trainers
that run their own rollouts (:class:`~lego_rl.kinds.OwnsRollout`) are out of reach here; their
own tests show the same (legorl-verl: tests/test_verl_cpu.py).
"""

from __future__ import annotations

import copy
import hashlib
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lego_rl.data import Sampling, Segment, Termination, Trajectory, TrialResult
from lego_rl.engine.resume import checkpoint_of
from lego_rl.kinds import Event, LoadsWeights, OwnsRollout, RunContext, ScoresTokens, Task
from lego_rl.spec.models import RunSpec
from lego_rl.testing.contracts.base import ContractEnv, ContractError, build, contract, expect, no_fatal_problems
from lego_rl.wrapping import expose

GROUPS, GROUP_SIZE, REPLY_TOKENS = 2, 4, 8
PROBE = "Fix the failing test."


class Killed(Exception):
    """Raised by the kit's rollout to stop a run between steps, as a kill would."""


class Recorded:
    """The inference backend, with every weight hand-off recorded as (version, digest)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.pushes: list[tuple[int, str]] = []
        expose(self, inner, skip=("load_weights",))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def load_weights(self, state_dict: dict[str, Any], version: int) -> None:
        self.pushes.append((version, digest(state_dict)))
        self.inner.load_weights(state_dict, version)


def digest(state: dict[str, Any]) -> str:
    """A checksum of a state dict's names and values (tensors with a numpy view: torch, numpy)."""
    h = hashlib.sha256()
    for name in sorted(state):
        value = state[name]
        if hasattr(value, "detach"):
            value = value.detach().cpu().float().numpy()
        h.update(name.encode())
        h.update(value.tobytes() if hasattr(value, "tobytes") else repr(value).encode())
    return h.hexdigest()


class KeepAll:
    """The run's filter: every group trains."""

    def select_tasks(self, tasks: list[Task]) -> list[Task]:
        return list(tasks)

    def keep_group(self, group: list[TrialResult]) -> bool:
        return True


@dataclass
class Sampled:
    """A reply the kit's rollout sampled: its reward less its group's mean (the rewards
    alternate 1, 0, so the mean is 0.5) and the log-probs inference gave it when it sampled it."""

    prompt: list[int]
    reply: list[int]
    centred: float
    before: list[float]


@dataclass
class Run:
    """One training run of the kit: what inference received and what the trainer reported."""

    inference: Recorded
    events: list[Event] = field(default_factory=list)
    sampled: list[Sampled] = field(default_factory=list)

    def steps(self) -> list[dict[str, Any]]:
        return [e.data for e in self.events if e.kind == "step"]

    def shifts(self) -> list[tuple[float, float]]:
        """Per sampled reply: (reward - group mean, change of its log-prob since it was sampled)."""
        return [(s.centred, sum(self.inference.score(s.prompt, s.reply, 1.0)) - sum(s.before)) for s in self.sampled]

    def probe(self) -> list[float]:
        """The backend's log-probs of a fixed reply to the probe prompt (its current weights)."""
        ids = prompt_ids(self.inference)
        reply = self.inference.tokenizer.encode(" It passes now.", add_special_tokens=False)
        return list(self.inference.score(ids, reply, 1.0))


def prompt_ids(inference: Any) -> list[int]:
    tok = inference.tokenizer
    text = tok.apply_chat_template([{"role": "user", "content": PROBE}], add_generation_prompt=True, tokenize=False)
    return list(tok.encode(text, add_special_tokens=False))


def inference_backend(env: ContractEnv) -> Any:
    """The first installed inference plugin that passes its preflight and can be checked here."""
    for name in env.registry.names("inference"):
        backend: Any = build(env.registry.get("inference", name), env)
        fatal = [p for p in backend.preflight() if p.fatal]
        if isinstance(backend, LoadsWeights) and isinstance(backend, ScoresTokens) and not fatal:
            return backend
    raise ContractError("no installed inference plugin loads weights, scores tokens and passes its preflight")


def rollout_of(run: Run, kill_at: int | None) -> Callable[[int], list[list[TrialResult]]]:
    """Groups of trials sampled from the run's inference, rewards 1, 0, 1, 0 in each group."""
    inference = run.inference

    def rollout(step: int) -> list[list[TrialResult]]:
        if step == kill_at:
            raise Killed(f"killed before step {step}")
        ids = prompt_ids(inference)
        groups = []
        for g in range(GROUPS):
            trials = []
            for i in range(GROUP_SIZE):
                seed = 1000 * step + 100 * g + i
                gen = inference.generate(ids, Sampling(max_tokens=REPLY_TOKENS, temperature=1.0, seed=seed))
                reward = float(i % 2 == 0)
                before = list(inference.score(ids, gen.completion_ids, 1.0))
                run.sampled.append(Sampled(ids, list(gen.completion_ids), reward - 0.5, before))
                segment = Segment(
                    ids=[*ids, *gen.completion_ids],
                    loss_mask=[0] * len(ids) + [1] * len(gen.completion_ids),
                    logprobs=[0.0] * len(ids) + list(gen.logprobs),
                )
                trials.append(
                    TrialResult(
                        trial_id=f"{step}-{g}-{i}", task=f"contract-{g}", reward=reward,
                        termination=Termination.COMPLETED, step=step,
                        trajectory=Trajectory(session=f"{step}-{g}-{i}", segments=[segment]),
                    )
                )  # fmt: skip
            groups.append(trials)
        return groups

    return rollout


def training_run(trainer_of: Callable[[], Any], env: ContractEnv, run_dir: Path, steps: int, *,
                 kill_at: int | None = None, resume: bool = False) -> Run:  # fmt: skip
    """Run a fresh trainer for ``steps`` steps in ``run_dir`` (resuming from its checkpoint)."""
    context = env.build_context()
    spec = context.spec
    assert spec is not None
    spec = spec.model_copy(update={"run": RunSpec(output_dir=env.tmp, name="conformance", steps=steps, seed=7)})
    run = Run(Recorded(inference_backend(env)))
    optimizer = build(env.registry.get("optimizer", env.registry.names("optimizer")[0]), env)
    ctx = RunContext(
        spec=spec, run_dir=run_dir, inference=run.inference, optimizer=optimizer, filter=KeepAll(),
        rollout=rollout_of(run, kill_at), emit=run.events.append, log=lambda line: None,
    )  # fmt: skip
    ctx.extra["resume_from"] = checkpoint_of(run_dir) if resume else None
    try:
        trainer_of().run(ctx)
    except Killed:
        pass
    return run


def fresh_dir(env: ContractEnv, name: str) -> Path:
    path = env.tmp / "trainer-runs" / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def reachable(trainer: Any) -> bool:
    """Whether the kit can drive this trainer (it does not run its own rollouts)."""
    no_fatal_problems(trainer)
    return not isinstance(trainer, OwnsRollout)


@contract("trainer", "trains")
def trains(trainer: Any, env: ContractEnv) -> None:
    """a step on sampled trials with mixed rewards changes the weights inference samples with, towards the rewarded replies"""
    if not reachable(trainer):
        return
    run = training_run(lambda: trainer, env, fresh_dir(env, "trains"), steps=1)
    steps = run.steps()
    expect(len(steps) == 1, f"one step was asked for; the trainer reported {len(steps)} step events")
    loss = steps[0].get("loss")
    expect(isinstance(loss, int | float) and math.isfinite(loss), f"the step event's loss is {loss!r}, not a finite number")
    pushes = run.inference.pushes
    expect(bool(pushes), "the trainer never handed weights to inference (LoadsWeights.load_weights)")
    expect(run.inference.policy_version >= 1, f"policy_version is {run.inference.policy_version} after a step")
    if len(pushes) >= 2:
        expect(pushes[-1][1] != pushes[0][1], "the weights handed over after the step are those handed over before it")
    shifts = run.shifts()
    expect(any(moved != 0.0 for _, moved in shifts),
           "inference scores the replies the step trained on as it did when it sampled them: the weights did not change")  # fmt: skip
    towards = sum(centred * moved for centred, moved in shifts)
    expect(towards > 0.0,
           f"the step made the rewarded replies less likely against the unrewarded ones (sum of (reward - group mean) "
           f"x change of log-prob = {towards:.3g}): it climbs the loss, or trains on something else")  # fmt: skip


@contract("trainer", "resumes-bitwise")
def resumes_bitwise(trainer: Any, env: ContractEnv) -> None:
    """killed between steps and resumed from its checkpoint, a run ends with the weights of one that ran straight"""
    if not reachable(trainer):
        return
    pristine = copy.deepcopy(trainer)  # a fresh trainer per run, as a restarted process builds one

    def again() -> Any:
        return copy.deepcopy(pristine)

    straight = training_run(again, env, fresh_dir(env, "straight"), steps=2)
    killed_dir = fresh_dir(env, "killed")
    training_run(again, env, killed_dir, steps=2, kill_at=1)
    expect(checkpoint_of(killed_dir) is not None, f"a run killed after step 1 left no checkpoint at {killed_dir}/checkpoints/last")
    resumed = training_run(again, env, killed_dir, steps=2, resume=True)
    ran = [e.data.get("step") for e in resumed.events if e.kind == "step"]
    expect(ran == [1], f"the resumed run must run the second step only; its step events: {ran}")
    expect(bool(straight.inference.pushes) and bool(resumed.inference.pushes), "no weights were handed to inference")
    expect(
        resumed.inference.pushes[-1][1] == straight.inference.pushes[-1][1],
        "the resumed run's final weights differ from the straight run's (digests of the last hand-off)",
    )
    expect(resumed.probe() == straight.probe(), "the resumed run's policy scores a fixed reply differently")
