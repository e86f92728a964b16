"""Held-out evaluation (``spec.evaluate``): the current policy on tasks it never trains on.

Each evaluation runs ``samples`` trials (the held-out tasks cycled) through the same runner
as training (harness, proxy, sandbox, anti-cheat, verifier), ``run.concurrency`` at a time,
and emits one ``evaluation`` event: success rate, termination reasons, behaviour measures,
timing, the constant-answer baseline (what always sending the most common oracle fix would
score) and the blind baseline (the best fixed policy that edits without testing). Nothing from
these trials is trained on. ``apply`` evaluates before the first step and after the last, so
the two numbers compare the policy the run started from with the one it ended with.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lego_rl.data import Attribution, TrialResult
from lego_rl.engine.trial import TrialRunner
from lego_rl.kinds import Event, Task
from lego_rl.observe.behaviour import step_behaviour, tool_calls, trial_behaviour
from lego_rl.spec.models import EvaluateSpec


def eval_runner(runner: TrialRunner, plan: EvaluateSpec) -> TrialRunner:
    """A runner sharing ``runner``'s components, sampling at the evaluation's temperature."""
    if plan.temperature is None:
        return runner
    sampling = runner.setup.sampling.model_copy(update={"temperature": plan.temperature})
    return TrialRunner(dataclasses.replace(runner.setup, sampling=sampling))


def evaluate(
    runner: TrialRunner,
    tasks: list[Task],
    *,
    samples: int,
    label: str,
    concurrency: int,
    harness: str,
    version: int,
    emit: Callable[[Event], None],
    attempt: int = 0,
) -> dict[str, Any]:
    """Run ``samples`` held-out trials now; emit and return the ``evaluation`` event's data.
    ``attempt`` (the run's restarts so far) goes into the trial ids after the first, so a
    resumed run's evaluation never reuses the trial names (and sandbox directories) of an
    earlier one: ``eval-after-00003-e1``."""
    if not tasks:
        raise ValueError("evaluate.tasks: the held-out task source has no tasks")
    started = time.time()
    group = f"eval-{label}"
    suffix = f"-e{attempt}" if attempt else ""

    def one(index: int) -> TrialResult:
        trial_id = f"{group}-{index:05d}{suffix}"
        return runner.run(tasks[index % len(tasks)], trial_id, step=version, group=group)

    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix=group) as pool:
        results = list(pool.map(one, range(samples)))
    data = summarize(results, harness)
    data.update(
        label=label,
        policy_version=version,
        seconds=time.time() - started,
        constant_baseline=constant_baseline(drawn := [tasks[i % len(tasks)] for i in range(samples)]),
        blind_baseline=blind_baseline(drawn),
    )
    emit(Event("evaluation", data, time.time()))
    return data


def summarize(results: list[TrialResult], harness: str) -> dict[str, Any]:
    """Success rate over the trials the policy is answerable for, and what ended them."""
    infrastructure = [r for r in results if r.attribution == Attribution.INFRASTRUCTURE]
    scored = [r for r in results if r.attribution != Attribution.INFRASTRUCTURE]
    behaviour = [trial_behaviour(tool_calls(r.model_dump(mode="json"), (), harness), harness, r.reward) for r in scored]
    return {
        "samples": len(results),
        "scored": len(scored),
        "infrastructure_failures": len(infrastructure),
        "success": sum(r.reward for r in scored) / len(scored) if scored else None,
        "terminations": dict(Counter(r.termination.value for r in results)),
        "per_task": _per_task(scored),
        "behaviour": step_behaviour(behaviour),
    }


def constant_baseline(tasks: list[Task]) -> float | None:
    """The success of the best constant answer: the share of these samples whose oracle fix is
    the most common one (None when the tasks have no oracle). A policy that ignores the
    instruction and always sends that fix scores this; success above it reads the task."""
    fixes = [tuple(t.oracle_commands) for t in tasks]
    if not fixes or not all(fixes):
        return None
    return Counter(fixes).most_common(1)[0][1] / len(fixes)


def blind_baseline(tasks: list[Task]) -> float | None:
    """The success of the best fixed policy that edits without testing, of three: always the
    most common oracle fix (:func:`constant_baseline`); where the tasks name candidate fixes,
    always the candidate listed at one place; or the candidate that was the fix most often
    among the other samples offering the same candidates (leave-one-out, a guess among them
    where no other does), which a policy can learn when the fix is predictable from the
    candidates alone. None when the tasks have no oracle. Success above it needs what only
    running the tests tells."""
    constant = constant_baseline(tasks)
    if constant is None:
        return None
    places = Counter(
        i for t in tasks for i, command in enumerate(t.candidate_commands) if command in t.oracle_commands
    )
    return max(constant, max(places.values(), default=0) / len(tasks), _same_candidates_rule(tasks))


def _same_candidates_rule(tasks: list[Task]) -> float:
    """Leave-one-out success of answering each sample with the fix most common among the other
    samples offering the same candidate set (ties and unseen sets: a uniform guess)."""
    offered = [(frozenset(t.candidate_commands), tuple(t.oracle_commands)) for t in tasks if t.candidate_commands]
    fixes: dict[frozenset[str], Counter[tuple[str, ...]]] = {}
    for key, fix in offered:
        fixes.setdefault(key, Counter())[fix] += 1
    score = 0.0
    for key, fix in offered:
        others = fixes[key] - Counter({fix: 1})
        best = max(others.values(), default=0)
        winners = [f for f, n in others.items() if n == best] if best else []
        score += (fix in winners) / len(winners) if winners else 1 / len(key)
    return score / len(tasks)


def _per_task(results: list[TrialResult]) -> dict[str, float]:
    rewards: dict[str, list[float]] = {}
    for r in results:
        rewards.setdefault(r.task, []).append(r.reward)
    return {task: sum(v) / len(v) for task, v in sorted(rewards.items())}
