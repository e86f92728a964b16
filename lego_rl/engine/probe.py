"""Probing: k attempts per task with the current policy, giving per-task pass rates.

Runs the spec's own trial pipeline (backend, proxy, sandbox, harness, verifier) through the
rollout pool in sync mode, one group of ``attempts`` per task that has fewer stored attempts
than that; infrastructure failures are retried and never counted. Results merge into the
stored file, so probing the same policy again only runs what is missing. Each probe's
trial directories go to a fresh ``<file stem>-trials/probe[-N]``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from lego_rl.data import Attribution, TrialResult
from lego_rl.engine.groups import KeepAll
from lego_rl.engine.passrates import PassRates, policy_key
from lego_rl.engine.pool import PoolConfig
from lego_rl.engine.resume import fresh_run_dir
from lego_rl.engine.rollouts import build_rollouts
from lego_rl.registry import BuildContext, Registry
from lego_rl.spec.resolve import Resolved


def probe(
    resolved: Resolved,
    registry: Registry,
    spec_path: Path,
    *,
    attempts: int,
    path: Path,
    on_trial: Callable[[TrialResult], None] = lambda r: None,
) -> PassRates:
    """Probe every task with fewer than ``attempts`` stored attempts; save and return the rates."""
    spec = resolved.spec
    rates = PassRates.load(path, policy_key(spec.model))
    # each probe gets its own directory: trial ids restart at every probe, trial dirs may not
    work_dir = fresh_run_dir(path.parent / f"{path.stem}-trials" / "probe")
    ctx = BuildContext(spec=spec, run_dir=work_dir, spec_dir=spec_path.resolve().parent)

    def build(block_path: str) -> Any:
        block = resolved.block(block_path)
        return registry.build(block.kind, block.block.plugin, block.options, ctx)

    todo = [t for t in build("tasks").tasks() if rates.missing(t.name, attempts)]
    if not todo:
        return rates
    rollouts = build_rollouts(spec, build, lambda event: None)
    config = PoolConfig(
        tasks_per_step=len(todo),
        group_size=attempts,
        concurrency=spec.run.concurrency,
        retries=spec.run.retries,
        trial_timeout=spec.run.trial_timeout,
    )
    pool = rollouts.pool(config, todo, seed=spec.run.seed, filter=KeepAll(), on_trial=on_trial)
    rollouts.proxy.start()
    try:
        groups = pool(0)
    finally:
        pool.close()
        rollouts.proxy.stop()
    for group in groups:
        rates.tasks.pop(group[0].task, None)  # a fresh set of attempts replaces a partial one
        for trial in group:
            if trial.attribution != Attribution.INFRASTRUCTURE:
                rates.add(trial.task, trial.reward > 0)
    rates.save(path)
    return rates
