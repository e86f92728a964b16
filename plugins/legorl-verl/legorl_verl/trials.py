"""One lego-rl trial per verl sample, inside an agent-loop worker.

:class:`TrialKit` holds what every trial of a worker shares (tasks, sandbox backend,
harness, verifier, anti-cheat, dialect), built once per process from the spec that the
translated verl config carries under ``legorl``. Each trial gets its own proxy whose
inference is verl's server client (:class:`~legorl_verl.inference.VerlServerInference`), so
the trial id is the request id verl routes by.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lego_rl.data import Attribution, TrialResult
from lego_rl.engine.wiring import TrialLimits, TrialWiring
from lego_rl.kinds import AntiCheat, Dialect, Harness, SandboxBackend, Task, Verifier
from lego_rl.registry import BuildContext, Registry, default_registry
from lego_rl.spec.models import Spec
from lego_rl.spec.resolve import resolve
from legorl_verl.inference import VerlServerInference


@dataclass
class TrialKit:
    """The components every trial of one worker shares."""

    spec: Spec
    tasks: dict[str, Task]
    sandbox: SandboxBackend
    harness: Harness
    verifier: Verifier
    dialect: Dialect
    anticheat: list[AntiCheat] = field(default_factory=list)

    @classmethod
    def from_spec(cls, spec: Spec, spec_dir: Path, run_dir: Path, registry: Registry | None = None) -> TrialKit:
        registry = registry or default_registry()
        resolved = resolve(spec, registry)
        ctx = BuildContext(spec=spec, run_dir=run_dir, spec_dir=spec_dir)

        def build(path: str) -> Any:
            block = resolved.block(path)
            return registry.build(block.kind, block.block.plugin, block.options, ctx)

        tasks = build("filter").select_tasks(build("tasks").tasks())
        return cls(
            spec=spec,
            tasks={t.name: t for t in tasks},
            sandbox=build("sandbox"),
            harness=build("harness"),
            verifier=build("verifier"),
            dialect=build("dialect"),
            anticheat=[build(f"anticheat.{i}") for i in range(len(spec.anticheat))],
        )

    def task(self, name: str) -> Task:
        try:
            return self.tasks[name]
        except KeyError:
            raise KeyError(f"verl asked for task {name!r}, which the spec's tasks do not have") from None

    def run(
        self, task_name: str, trial_id: str, client: Any, loop: asyncio.AbstractEventLoop, tokenizer: Any
    ) -> tuple[TrialResult, list[TrialResult]]:
        """Run one trial (blocking; call it off the event loop), retrying infrastructure
        failures up to ``run.retries`` times; also the attempts that failed so."""
        task = self.task(task_name)
        failed: list[TrialResult] = []
        result = self._once(task, trial_id, client, loop, tokenizer)
        for attempt in range(1, self.spec.run.retries + 1):
            if result.attribution != Attribution.INFRASTRUCTURE:
                break
            failed.append(result)
            result = self._once(task, f"{trial_id}-r{attempt}", client, loop, tokenizer)
        return result, failed

    def _once(
        self, task: Task, trial_id: str, client: Any, loop: asyncio.AbstractEventLoop, tokenizer: Any
    ) -> TrialResult:
        spec = self.spec
        inference = VerlServerInference(client, loop, tokenizer, trial_id)
        wiring = TrialWiring(inference, spec.dialect.plugin, self.dialect, spec.model, freeze_heap=False)
        runner = wiring.runner(
            sandbox=self.sandbox,
            harness=self.harness,
            verifier=self.verifier,
            limits=TrialLimits.of_run(spec.run),
            anticheat=self.anticheat,
        )
        with wiring.serving():
            return runner.run(task, trial_id)


_kits: dict[str, TrialKit] = {}
_lock = threading.Lock()


def kit_for(legorl: dict[str, Any]) -> TrialKit:
    """This process's kit for the spec carried in the verl config (built on first use)."""
    spec = Spec.model_validate(legorl["spec"])
    key = spec.model_dump_json()
    with _lock:
        if key not in _kits:
            _kits[key] = TrialKit.from_spec(spec, Path(legorl["spec_dir"]), Path(legorl["run_dir"]))
        return _kits[key]
