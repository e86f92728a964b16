"""``legorl apply``: build every component of a resolved spec and hand the loop to the trainer."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from lego_rl.console import make_console
from lego_rl.data import TrialResult
from lego_rl.engine.evaluate import eval_runner, evaluate
from lego_rl.engine.pool import PoolConfig, RolloutPool
from lego_rl.engine.resume import (
    checkpoint_of,
    choose_run_dir,
    engine_state,
    restarts,
    restore_pool,
)
from lego_rl.engine.rollouts import Rollouts, build_rollouts
from lego_rl.engine.weights import gated
from lego_rl.kinds import Event, Group, HoldsResources, Observer, OwnsRollout, RunContext
from lego_rl.observe.reader import is_run_dir
from lego_rl.observe.report import write_report
from lego_rl.proxy.server import ProxyServer
from lego_rl.registry import BuildContext, Registry
from lego_rl.spec.models import RunSpec, Spec
from lego_rl.spec.resolve import Resolved

__all__ = ["apply", "pool_config"]


class Fanout:
    """Sends each event to every observer; one failing observer never stops the run."""

    def __init__(self, observers: list[Observer], console: Console):
        self.observers, self.console = observers, console

    def __call__(self, event: Event) -> None:
        for obs in self.observers:
            try:
                obs.emit(event)
            except Exception as exc:  # keep the run going, but say so
                why = escape(f"observer {type(obs).__name__} failed: {exc}")
                self.console.print(f"[yellow]{why}")

    def close(self) -> None:
        for obs in self.observers:
            obs.close()


def apply(
    resolved: Resolved,
    registry: Registry,
    spec_path: Path,
    console: Console | None = None,
) -> Path:
    """Run the spec to the end; return the run directory. What it says goes to ``console``
    (by default one that never wraps a line written to a file or pipe)."""
    console = console or make_console()
    log = _plain(console)
    spec = resolved.spec
    chosen = choose_run_dir(spec)
    run_dir = chosen.path
    if chosen.note:
        log(chosen.note)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "spec.yaml").write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False))
    ctx = BuildContext(spec=spec, run_dir=run_dir, spec_dir=spec_path.resolve().parent)

    def build(path: str) -> Any:
        block = resolved.block(path)
        return registry.build(block.kind, block.block.plugin, block.options, ctx)

    observers = [build(f"observer.{i}") for i in range(len(spec.observer))]
    emit = Fanout(observers, console)
    started = time.time()
    resumed = str(chosen.resume_from) if chosen.resume_from else None
    emit(
        Event(
            "run_start",
            {"spec": spec.model_dump(mode="json"), "run_dir": str(run_dir), "resumed_from": resumed},
            started,
        )
    )
    proxy: ProxyServer | None = None
    inference: Any = None
    try:
        if isinstance(trainer := build("trainer"), OwnsRollout):
            _run_owned(trainer, spec, run_dir, build, emit, log)
            emit(Event("run_end", {"seconds": time.time() - started, "status": "ok"}, time.time()))
            return run_dir
        rollouts = build_rollouts(spec, build, emit)
        inference = rollouts.inference
        proxy = rollouts.proxy
        filter_ = build("filter")
        tasks = filter_.select_tasks(build("tasks").tasks())
        proxy.start()
        held_out = _held_out(spec, build, rollouts, emit, console, restarts(run_dir))
        if chosen.resume_from is None:
            held_out("before")
        with _progress(console) as on_trial, _interrupts():
            pool = rollouts.pool(
                pool_config(spec.run),
                tasks,
                seed=spec.run.seed,
                filter=filter_,
                on_trial=on_trial(spec.run.tasks_per_step * spec.run.group_size),
            )
            try:
                trainer.run(
                    RunContext(
                        spec=spec,
                        run_dir=run_dir,
                        inference=gated(rollouts.inference, pool),
                        optimizer=build("optimizer"),
                        filter=filter_,
                        rollout=_reporting(pool, emit),
                        emit=emit,
                        log=log,
                        engine_state=partial(engine_state, pool),
                        restore_engine=_restoring(pool, run_dir, console),
                        extra={"rollout_metrics": pool.metrics, "resume_from": chosen.resume_from},
                    )
                )
            finally:
                pool.close()  # cut-off trials end (cancelled) before run_end is written
            held_out("after")
        emit(Event("run_end", {"seconds": time.time() - started, "status": "ok"}, time.time()))
    except BaseException as exc:
        status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        emit(Event("run_end", {"status": status, "error": repr(exc)}, time.time()))
        if status == "interrupted":
            log(_stopped(run_dir, exc))
        raise
    finally:
        if proxy is not None:
            proxy.stop()
        if isinstance(inference, HoldsResources):
            inference.close()  # a backend that launched a server (vllm) stops it now, not at exit
        emit.close()
        _write_report(run_dir, console)
    log(f"run finished in {time.time() - started:.0f}s: {run_dir}")
    return run_dir


def _plain(console: Console) -> Callable[[str], None]:
    """Print a line as it is (a path's brackets are not markup): the trainer's ``log``."""
    return lambda line: console.print(escape(line))


def _stopped(run_dir: Path, exc: BaseException) -> str:
    """What an interrupted run tells: where a rerun of the same command continues."""
    why = str(exc) or "interrupted"
    checkpoint = checkpoint_of(run_dir)
    if checkpoint is None:
        return f"stopped ({why}) before the first checkpoint: a rerun starts a fresh run"
    return f"stopped ({why}): the same command again resumes {run_dir} from {checkpoint}"


def _write_report(run_dir: Path, console: Console) -> None:
    """The end-of-run report (report/ beside the store); it never fails the run."""
    if not is_run_dir(run_dir):
        return  # no store observer: nothing to report from
    try:
        console.print(f"report: {escape(str(write_report(run_dir).parent))}")
    except Exception as exc:  # the run's data is safe in the store; say how to retry
        why = escape(f"report not written: {exc} (legorl report {run_dir})")
        console.print(f"[yellow]{why}")


def _run_owned(
    trainer: Any,
    spec: Spec,
    run_dir: Path,
    build: Callable[[str], Any],
    emit: Callable[[Event], None],
    log: Callable[[str], None],
) -> None:
    """A trainer that runs its own rollouts (verl: its servers, its agent loop, our trials in
    its workers) gets the run context without our inference, proxy and pool."""

    def no_rollout(step: int) -> list[Group]:
        raise RuntimeError(f"trainer {spec.trainer.plugin!r} runs its own rollouts; it cannot ask the engine for step {step}")

    trainer.run(
        RunContext(
            spec=spec, run_dir=run_dir,
            inference=None,  # type: ignore[arg-type]  # none here; RunContext.inference is typed for the engine's loop
            optimizer=build("optimizer"), filter=build("filter"), rollout=no_rollout, emit=emit, log=log,
        )
    )  # fmt: skip


def _held_out(
    spec: Spec, build: Callable[[str], Any], rollouts: Rollouts, emit: Callable[[Event], None], console: Console,
    attempt: int,
) -> Callable[[str], None]:
    """``evaluate(label)``: the spec's held-out evaluation now (a no-op without ``evaluate``);
    ``attempt`` tells its trial ids from an earlier attempt's (a resumed run evaluates again)."""
    plan = spec.evaluate
    if plan is None:
        return lambda label: None
    tasks = build("evaluate.tasks").tasks()
    runner = eval_runner(rollouts.runner, plan)

    def run(label: str) -> None:
        console.print(f"held-out evaluation ({label}): {plan.samples} trials")
        data = evaluate(
            runner, tasks, samples=plan.samples, label=label, concurrency=spec.run.concurrency,
            harness=spec.harness.plugin, version=int(rollouts.inference.policy_version), emit=emit,
            attempt=attempt,
        )  # fmt: skip
        success = "n/a" if data["success"] is None else f"{data['success']:.3f}"
        console.print(f"held-out {label}: success {success} over {data['scored']} trials in {data['seconds']:.0f}s")

    return run


def pool_config(run: RunSpec) -> PoolConfig:
    """The rollout pool's settings from the spec's run block (sync is staleness 0)."""
    asynchronous = run.mode == "async"
    return PoolConfig(
        tasks_per_step=run.tasks_per_step,
        group_size=run.group_size,
        concurrency=run.concurrency,
        max_staleness=run.max_staleness if asynchronous else 0,
        partial_rollouts=asynchronous and run.partial_rollouts,
        stale=run.stale,
        retries=run.retries,
        trial_timeout=run.trial_timeout,
        spare_groups=run.spare_groups if asynchronous else 0,
        rebalance=run.rebalance,
    )


def _restoring(
    pool: RolloutPool, run_dir: Path, console: Console
) -> Callable[[dict[str, Any]], None]:
    """The trainer's ``restore_engine``: the pool back at the checkpoint, plus the trials the
    killed run finished after it (see :func:`~lego_rl.engine.resume.restore_pool`)."""

    def restore(state: dict[str, Any]) -> None:
        reused = restore_pool(pool, state, run_dir)
        if reused:
            console.print(f"{reused} trials finished after the checkpoint are kept for reuse")

    return restore


def _reporting(pool: RolloutPool, emit: Callable[[Event], None]) -> Callable[[int], list[Group]]:
    """The trainer's rollout: the pool's next groups, plus a ``rollout`` event of its metrics
    and of the trials handed over (what step ``step`` counts; a resumed run's re-done step
    writes a later event for the same step)."""

    def rollout(step: int) -> list[Group]:
        groups = pool(step)
        trials = [t.trial_id for g in groups for t in g]
        emit(Event("rollout", {"step": step, **pool.metrics(), "trials": trials}, time.time()))
        return groups

    return rollout


@contextmanager
def _interrupts() -> Iterator[None]:
    """SIGTERM ends the run like Ctrl-C: observers closed, sandboxes stopped, run_end written."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _progress:
    """A Rich progress bar of the trials of the current step, fed by the rollout's callback."""

    def __init__(self, console: Console):
        self.bar = Progress(
            TextColumn("trials"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[last]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task_id: Any = None
        self.done = 0

    def __enter__(self) -> Callable[[int], Callable[[TrialResult], None]]:
        self.bar.__enter__()

        def factory(per_step: int) -> Callable[[TrialResult], None]:
            def on_trial(result: TrialResult) -> None:
                if self.task_id is None:
                    self.task_id = self.bar.add_task("trials", total=per_step, last="")
                elif self.done == per_step:
                    self.bar.reset(self.task_id, total=per_step)
                    self.done = 0
                self.done += 1
                last = f"{result.task}: {result.termination.value} reward={result.reward:g}"
                self.bar.update(self.task_id, advance=1, last=last)

            return on_trial

        return factory

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.bar.__exit__(kind, exc, tb)
