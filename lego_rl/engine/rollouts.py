"""The trial-generating half of a run, shared by ``legorl apply`` and ``legorl probe``:
inference backend, the proxy in front of it, a TrialRunner, and a rollout pool over them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lego_rl.data import CallRecord, Sampling, TrialResult
from lego_rl.engine.clock import ThreadClock
from lego_rl.engine.launch import ThreadLauncher
from lego_rl.engine.metrics import BusyMeter
from lego_rl.engine.pool import PoolConfig, RolloutPool
from lego_rl.engine.scheduler import TaskCycle
from lego_rl.engine.trial import TrialRunner, TrialSetup
from lego_rl.kinds import Event, Filter, Task
from lego_rl.proxy.server import ProxyServer
from lego_rl.spec.models import Spec


@dataclass
class Rollouts:
    inference: Any
    proxy: ProxyServer
    runner: TrialRunner
    busy: BusyMeter

    def pool(
        self,
        config: PoolConfig,
        tasks: list[Task],
        *,
        seed: int,
        filter: Filter,
        on_trial: Callable[[TrialResult], None] = lambda r: None,
    ) -> RolloutPool:
        """A pool running this runner's trials on threads in wall time."""
        return RolloutPool(
            config,
            TaskCycle(tasks, seed),
            ThreadLauncher(self.runner),
            ThreadClock(),
            version=lambda: int(self.inference.policy_version),
            filter=filter,
            on_trial=on_trial,
            busy=self.busy,
        )


def build_rollouts(spec: Spec, build: Callable[[str], Any], emit: Callable[[Event], None]) -> Rollouts:
    """Build the backend, proxy (not started) and runner of ``spec``; ``build(path)`` makes a block."""
    busy = BusyMeter()

    def on_call(record: CallRecord) -> None:
        busy.add(record.started_at, record.ended_at)
        emit(Event("call", {"record": record}, time.time()))

    inference = build("inference")
    proxy = ProxyServer(
        inference,
        {spec.dialect.plugin: build("dialect")},
        model_name=spec.model.name,
        max_context=spec.model.max_context,
        chat_template=spec.model.chat_template,
        on_call=on_call,
    )
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
    return Rollouts(inference, proxy, runner, busy)
