"""``legorl apply``: build every component of a resolved spec and hand the loop to the trainer."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from lego_rl.data import Sampling, TrialResult
from lego_rl.engine.context import RunContext
from lego_rl.engine.scheduler import SyncRollout, TaskCycle
from lego_rl.engine.trial import TrialRunner, TrialSetup
from lego_rl.kinds import Event, Observer
from lego_rl.proxy.server import ProxyServer
from lego_rl.registry import BuildContext, Registry
from lego_rl.spec.resolve import Resolved


class Fanout:
    """Sends each event to every observer; one failing observer never stops the run."""

    def __init__(self, observers: list[Observer], console: Console):
        self.observers, self.console = observers, console

    def __call__(self, event: Event) -> None:
        for obs in self.observers:
            try:
                obs.emit(event)
            except Exception as exc:  # keep the run going, but say so
                self.console.print(f"[yellow]observer {type(obs).__name__} failed: {exc}")

    def close(self) -> None:
        for obs in self.observers:
            obs.close()


def apply(
    resolved: Resolved,
    registry: Registry,
    spec_path: Path,
    console: Console | None = None,
) -> Path:
    """Run the spec to the end; return the run directory."""
    console = console or Console()
    spec = resolved.spec
    run_dir = fresh_run_dir(spec.run.run_dir.resolve())
    if run_dir != spec.run.run_dir.resolve():
        console.print(f"{spec.run.run_dir} holds an earlier run; this one goes to {run_dir}")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "spec.yaml").write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False))
    ctx = BuildContext(spec=spec, run_dir=run_dir, spec_dir=spec_path.resolve().parent)

    def build(path: str) -> Any:
        block = resolved.block(path)
        return registry.build(block.kind, block.block.plugin, block.options, ctx)

    observers = [build(f"observe.{i}") for i in range(len(spec.observe))]
    emit = Fanout(observers, console)
    started = time.time()
    emit(Event("run_start", {"spec": spec.model_dump(mode="json"), "run_dir": str(run_dir)}, started))
    proxy: ProxyServer | None = None
    try:
        inference = build("inference")
        proxy = ProxyServer(
            inference,
            {spec.dialect.plugin: build("dialect")},
            model_name=spec.model.name,
            max_context=spec.model.max_context,
            chat_template=spec.model.chat_template,
            on_call=lambda record: emit(Event("call", {"record": record}, time.time())),
        )
        filter_ = build("filter")
        tasks = filter_.select_tasks(build("tasks").tasks())
        runner = TrialRunner(
            TrialSetup(
                sandbox=build("sandbox"),
                harness=build("harness"),
                verifier=build("verifier"),
                proxy=proxy,
                dialect=spec.dialect.plugin,
                model_name=spec.model.name,
                sampling=Sampling(temperature=spec.run.temperature, max_tokens=spec.run.max_tokens),
                max_calls=spec.run.max_turns + 2,
                anticheat=[build(f"anticheat.{i}") for i in range(len(spec.anticheat))],
                emit=emit,
            )
        )
        trainer = build("trainer")
        proxy.start()
        with _progress(console) as on_trial:
            rollout = SyncRollout(
                runner,
                TaskCycle(tasks, spec.run.seed),
                tasks_per_step=spec.run.tasks_per_step,
                group_size=spec.run.group_size,
                concurrency=spec.run.concurrency,
                on_trial=on_trial(spec.run.tasks_per_step * spec.run.group_size),
            )
            trainer.run(
                RunContext(
                    spec=spec,
                    run_dir=run_dir,
                    inference=inference,
                    optimizer=build("optimizer"),
                    filter=filter_,
                    rollout=rollout,
                    emit=emit,
                    log=console.print,
                    engine_state=rollout.state,
                    restore_engine=rollout.restore,
                )
            )
        emit(Event("run_end", {"seconds": time.time() - started, "status": "ok"}, time.time()))
    except BaseException as exc:
        emit(Event("run_end", {"status": "failed", "error": repr(exc)}, time.time()))
        raise
    finally:
        if proxy is not None:
            proxy.stop()
        emit.close()
    console.print(f"run finished in {time.time() - started:.0f}s: {run_dir}")
    return run_dir


def fresh_run_dir(wanted: Path) -> Path:
    """``wanted`` if unused, else the first free ``wanted-N``: a run never overwrites another."""
    candidate, n = wanted, 1
    while candidate.exists() and any(candidate.iterdir()):
        n += 1
        candidate = wanted.with_name(f"{wanted.name}-{n}")
    return candidate


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

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(*exc)
