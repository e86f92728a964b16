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
    run_dir = spec.run.run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "spec.yaml").write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False))
    ctx = BuildContext(spec=spec, run_dir=run_dir, spec_dir=spec_path.resolve().parent)

    def build(path: str) -> Any:
        block = resolved.block(path)
        return registry.build(block.kind, block.block.plugin, block.options, ctx)

    observers = [build(f"observe.{i}") for i in range(len(spec.observe))]
    emit = Fanout(observers, console)
    emit(Event("run_start", {"spec": spec.model_dump(mode="json"), "run_dir": str(run_dir)}, time.time()))

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
    started = time.time()
    proxy.start()
    try:
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
                )
            )
        emit(Event("run_end", {"seconds": time.time() - started, "status": "ok"}, time.time()))
    except BaseException as exc:
        emit(Event("run_end", {"status": "failed", "error": repr(exc)}, time.time()))
        raise
    finally:
        proxy.stop()
        emit.close()
    console.print(f"run finished in {time.time() - started:.0f}s: {run_dir}")
    return run_dir


class _progress:
    """A Rich progress bar of trials per step, fed by the rollout's on_trial callback."""

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

    def __enter__(self) -> Callable[[int], Callable[[TrialResult], None]]:
        self.bar.__enter__()

        def factory(total: int) -> Callable[[TrialResult], None]:
            def on_trial(result: TrialResult) -> None:
                if self.task_id is None or self.bar.tasks[0].finished:
                    if self.task_id is not None:
                        self.bar.remove_task(self.task_id)
                    self.task_id = self.bar.add_task("trials", total=total, last="")
                last = f"{result.task}: {result.termination.value} reward={result.reward:g}"
                self.bar.update(self.task_id, advance=1, last=last)

            return on_trial

        return factory

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(*exc)
