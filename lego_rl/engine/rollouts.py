"""The trial-generating half of a run, shared by ``legorl apply`` and ``legorl probe``:
inference backend, the proxy in front of it, a TrialRunner, and a rollout pool over them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lego_rl.data import CallRecord, TrialResult
from lego_rl.engine.clock import ThreadClock
from lego_rl.engine.launch import ThreadLauncher
from lego_rl.engine.metrics import BusyMeter
from lego_rl.engine.pool import PoolConfig, RolloutPool
from lego_rl.engine.scheduler import TaskCycle
from lego_rl.engine.trial import TrialRunner
from lego_rl.engine.wiring import TrialLimits, TrialWiring
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
    wiring = TrialWiring(inference, spec.dialect.plugin, build("dialect"), spec.model, on_call=on_call)
    runner = wiring.runner(
        sandbox=build("sandbox"),
        harness=build("harness"),
        verifier=build("verifier"),
        limits=TrialLimits.of_run(spec.run),
        anticheat=[build(f"anticheat.{i}") for i in range(len(spec.anticheat))],
        emit=emit,
    )
    return Rollouts(inference, wiring.proxy, runner, busy)
