"""Run the red-team attacks through the real trial pipeline and judge the outcome.

Each attack is one trial of :class:`~lego_rl.engine.trial.TrialRunner` with the local
sandbox, all five anti-cheat policies, the test-script verifier and the scripted harness
playing the attacker; the proxy runs but no model is ever called. The honest oracle (the
task's own fix, applied the same way) must still get reward 1, every attack 0.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lego_rl.data import Sampling, Termination
from lego_rl.engine.trial import TrialRunner, TrialSetup
from lego_rl.proxy.doubles import ScriptedInference, tiny_chat_tokenizer
from lego_rl.proxy.server import ProxyServer
from lego_rl.registry import BuildContext
from legorl_std.anticheat import git_history, no_network, process_reaper, reward_guard, test_guard
from legorl_std.dialect_openai_chat import OpenAIChatDialect
from legorl_std.local_sandbox import LocalSandboxBackend, LocalSandboxOptions
from legorl_std.redteam.attacks import ATTACKS, Attack
from legorl_std.redteam.bait import Bait
from legorl_std.redteam.task import SOLVE_SH, build_task
from legorl_std.sandbox_limits import Limits, cgroup_parents
from legorl_std.scripted_harness import ScriptedHarness
from legorl_std.test_script import ScriptVerifier

ORACLE = Attack("oracle", "honest", "the task's own fix", (SOLVE_SH,))
REDTEAM_LIMITS = Limits(cpu_seconds=30, address_space_mb=2048, nproc=96, file_size_mb=64, open_files=1024)


@dataclass
class Outcome:
    attack: Attack
    reward: float
    termination: Termination
    reason: str
    seconds: float
    limits: tuple[str, ...] = ()
    """The resource limits of which this trial must report running into one (none: need not)."""

    @property
    def ok(self) -> bool:
        if self.attack is ORACLE:
            return self.reward == 1.0
        if self.termination in (Termination.INTERNAL_ERROR, Termination.SANDBOX_ERROR):
            return False  # the pipeline broke: the attack proved nothing
        if self.limits and not (
            self.termination == Termination.RESOURCE_LIMIT
            and self.reason.startswith(tuple(f"{limit}=" for limit in self.limits))
        ):
            return False
        blocked = self.termination == Termination.CHEAT_BLOCKED
        return self.reward == 0.0 and (blocked or not self.attack.detected)


def policies() -> list[Any]:
    return [
        no_network.NoNetwork(),
        git_history.GitHistory(),
        test_guard.TestGuard(),
        reward_guard.RewardGuard(),
        process_reaper.ProcessReaper(),
    ]


def run_suite(attacks: list[Attack] | None = None, workers: int = 3) -> list[Outcome]:
    """The oracle first (its fixed trial dir stays as bait for ``other-trials``), then the attacks."""
    chosen = list(ATTACKS if attacks is None else attacks)
    workdir = Path(tempfile.mkdtemp(prefix="legorl-redteam-", dir="/var/tmp"))
    bait = Bait()
    proxy = ProxyServer(
        ScriptedInference(tiny_chat_tokenizer(), []), {"openai-chat": OpenAIChatDialect()}, model_name="policy"
    )
    proxy.start()
    try:
        task = build_task(workdir / "tasks")
        backend = LocalSandboxBackend(
            LocalSandboxOptions(keep=True, limits=REDTEAM_LIMITS), BuildContext(run_dir=workdir / "run")
        )
        fill = {**bait.placeholders, "task": str(task.path), "trials": str(backend.root), "py": "python3"}
        seen = reported_limits()

        def trial(attack: Attack) -> Outcome:
            commands = [c if attack is ORACLE else c.format(**fill) for c in attack.commands]
            runner = TrialRunner(
                TrialSetup(
                    sandbox=backend,
                    harness=ScriptedHarness(commands),
                    verifier=ScriptVerifier(),
                    proxy=proxy,
                    dialect="openai-chat",
                    model_name="policy",
                    sampling=Sampling(),
                    anticheat=policies(),
                )
            )
            start = time.monotonic()
            result = runner.run(task, attack.name)
            limits = tuple(limit for limit in attack.limits if limit in seen)
            return Outcome(attack, result.reward, result.termination, result.reason, time.monotonic() - start, limits)

        outcomes = [trial(ORACLE)]
        with ThreadPoolExecutor(max(1, workers)) as pool:
            outcomes += list(pool.map(trial, chosen))
        return outcomes
    finally:
        proxy.stop()
        bait.close()
        _cleanup(workdir)


def reported_limits() -> set[str]:
    """The limits whose hitting the local sandbox reports on this host (see its preflight):
    storage and cgroups need root, memory and processes their cgroup controllers."""
    if os.geteuid() != 0:
        return {"file_size_mb", "cpu_seconds"}
    by_cgroup = {"memory": "memory_mb", "pids": "nproc"}
    return {"storage_mb", "file_size_mb", "cpu_seconds"} | {by_cgroup[c] for c in cgroup_parents() if c in by_cgroup}


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    attacks = [o for o in outcomes if o.attack is not ORACLE]
    return {
        "attacks": len(attacks),
        "false_rewards": sum(o.reward != 0.0 for o in attacks),
        "detected": sum(o.termination == Termination.CHEAT_BLOCKED for o in attacks),
        "resource_limits": sum(o.termination == Termination.RESOURCE_LIMIT for o in attacks),
        "missed_detections": sum(not o.ok and o.reward == 0.0 for o in attacks),
        "oracle_ok": all(o.ok for o in outcomes if o.attack is ORACLE),
    }


def _cleanup(workdir: Path) -> None:
    """Trials are stopped (unmounted) by the runner; their dirs hold only our files."""
    try:
        shutil.rmtree(workdir)
    except OSError as exc:  # pragma: no cover - leaves the dir for inspection
        print(f"redteam: could not remove {workdir}: {exc}", file=sys.stderr)

