"""Run the red-team attacks through the real trial pipeline and judge the outcome.

Each attack is one trial of :class:`~lego_rl.engine.trial.TrialRunner` on each task kind it
names (:mod:`legorl_std.redteam.task`), on each sandbox backend asked for (found through the
plugin registry, like any spec's), with all anti-cheat policies (``reward-hacking`` blocking),
the test-script verifier and the scripted harness playing the attacker; the proxy runs but no
model is ever called. The honest oracle of every task must still get reward 1, every attack 0,
and no attack may end as an infrastructure failure (that would launder a policy failure).
"""

from __future__ import annotations

import os
import posixpath
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lego_rl.data import Attribution, Sampling, Termination, attribute
from lego_rl.engine.wiring import TrialLimits, TrialWiring
from lego_rl.kinds import SandboxBackend, Task, TrialsRoot, Verifier
from lego_rl.registry import BuildContext, Registry
from legorl_std.anticheat import git_history, no_network, process_reaper, reward_guard, test_guard
from legorl_std.dialects.openai_chat import OpenAIChatDialect
from legorl_std.harness.scripted import ScriptedHarness
from legorl_std.redteam.attacks import ENDS_BY_ITSELF, Attack
from legorl_std.redteam.bait import Bait
from legorl_std.redteam.catalog import ALL_ATTACKS
from legorl_std.redteam.task import Target, bugfix_task, build_task, repo_task, shipped_task, with_timeouts
from legorl_std.sandbox.limits import Limits, cgroup_parents
from legorl_std.sandbox.local import LocalSandboxBackend, LocalSandboxOptions

REDTEAM_LIMITS = Limits(cpu_seconds=30, address_space_mb=2048, nproc=96, file_size_mb=64, open_files=1024)
BACKENDS: dict[str, dict[str, Any]] = {
    "local": {"keep": True, "limits": REDTEAM_LIMITS.model_dump()},
    "docker": {"keep": True, "limits": REDTEAM_LIMITS.model_dump()},  # contrib/legorl-docker, its daemon from $LEGORL_DOCKER_HOST
    "harbor": {
        "environment": {
            "import_path": "legorl_harbor.bwrap:BwrapEnvironment",
            "kwargs": {"sandbox": {"keep": True, "limits": REDTEAM_LIMITS.model_dump()}},
        }
    },
    # Harbor's own docker environment; its daemon from $DOCKER_HOST (with DOCKER_BUILDKIT=0)
    "harbor-docker": {"environment": {"type": "docker"}, "limits": REDTEAM_LIMITS.model_dump(), "storage_quota": True},
}
"""The sandbox backends the red team knows how to configure (limits as the attacks expect)."""
PLUGIN_OF = {"harbor-docker": "harbor"}
"""The sandbox plugin of a backend not named after it."""
ORACLE = Attack("oracle", "honest", "the task's own fix", ())
NOOP = Attack("no-op", "honest", "nothing at all", ())
"""Run on every task before the attacks: the oracle must get 1, doing nothing 0."""


@dataclass
class Outcome:
    attack: Attack
    kind: str
    backend: str
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
        if self.attack is NOOP:
            return self.reward == 0.0 and self.termination == Termination.COMPLETED
        if attribute(self.termination) == Attribution.INFRASTRUCTURE:
            return False  # the pipeline broke, or was made to look broken: the attack proved nothing
        if self.limits and not (
            self.termination == Termination.RESOURCE_LIMIT
            and self.reason.startswith(tuple(f"{limit}=" for limit in self.limits))
        ):
            return False
        blocked = self.termination == Termination.CHEAT_BLOCKED
        return self.reward == 0.0 and (blocked or not self.attack.detected)


def policies() -> list[Any]:
    from legorl_std.anticheat import reward_hacking

    return [
        no_network.NoNetwork(),
        git_history.GitHistory(),
        test_guard.TestGuard(),
        reward_guard.RewardGuard(),
        process_reaper.ProcessReaper(),
        reward_hacking.RewardHacking(block=True),
    ]


def run_suite(
    attacks: Sequence[Attack] | None = None,
    workers: int = 3,
    *,
    kinds: Sequence[str] = ("calc", "bugfix"),
    shipped: Sequence[Path] = (),
    bugs: Sequence[Path] = (),
    backends: Sequence[str] = ("local",),
) -> list[Outcome]:
    """Per backend: the oracle and the no-op of every task first, then every attack on every task
    of a kind it names (``shipped`` tasks are of kind ``shipped``, ``bugs``, pypi-bugs directories,
    of kind ``repo``)."""
    chosen = list(ALL_ATTACKS if attacks is None else attacks)
    workdir = Path(tempfile.mkdtemp(prefix="legorl-redteam-", dir="/var/tmp"))
    wiring = TrialWiring.without_model("openai-chat", OpenAIChatDialect())
    wiring.proxy.start()
    bait: Bait | None = None
    try:
        targets = _targets(workdir, kinds, shipped, bugs)
        verifiers = {t.verifier: _verifier(t.verifier) for t in targets}
        bait = Bait({t.name: t.fixed for t in targets})
        _plant_decoys(workdir, targets)
        reported = reported_limits()
        outcomes: list[Outcome] = []
        for name in backends:
            backend = _backend(name, workdir / f"run-{name}")
            root = backend.root if isinstance(backend, TrialsRoot) else workdir / f"run-{name}"

            def trial(
                job: tuple[Attack, Target],
                backend: SandboxBackend = backend,
                name: str = name,
                root: Path = root,
            ) -> Outcome:
                attack, target = job
                fill = _fill(target, bait, root)
                commands = [target.oracle] if attack is ORACLE else [c.format(**fill) for c in attack.commands]
                runner = wiring.runner(
                    sandbox=backend, harness=ScriptedHarness(commands), verifier=verifiers[target.verifier],
                    limits=TrialLimits(Sampling()), anticheat=policies(),
                )  # fmt: skip
                start = time.monotonic()
                task = with_timeouts(target.task, ENDS_BY_ITSELF) if attack.ends_by_itself else target.task
                result = runner.run(task, f"{attack.name}-{target.kind}-{name}")
                limits = tuple(limit for limit in attack.limits if limit in reported)
                return Outcome(
                    attack, target.kind, name, result.reward, result.termination, result.reason,
                    time.monotonic() - start, limits,
                )  # fmt: skip

            outcomes += [trial((honest, t)) for honest in (ORACLE, NOOP) for t in targets]
            jobs = [(a, t) for a in chosen for t in targets if t.kind in a.kinds]
            with ThreadPoolExecutor(max(1, workers)) as pool:
                outcomes += list(pool.map(trial, jobs))
        return outcomes
    finally:
        wiring.proxy.stop()
        if bait is not None:
            bait.close()
        _cleanup(workdir)


def _targets(workdir: Path, kinds: Sequence[str], shipped: Sequence[Path], bugs: Sequence[Path]) -> list[Target]:
    tasks = workdir / "tasks"
    tasks.mkdir()
    found = []
    if "calc" in kinds:
        found.append(build_task(tasks))
    if "bugfix" in kinds:
        found.append(bugfix_task(tasks))
    if shipped:
        probe = LocalSandboxBackend(LocalSandboxOptions(keep=False), BuildContext(run_dir=workdir / "probe"))
        found += [shipped_task(tasks, Path(p), lambda t, m, o: _fixed_by_oracle(probe, t, m, o)) for p in shipped]
    found += [repo_task(tasks, Path(b)) for b in bugs]
    names = [t.name for t in found]
    if len(set(names)) != len(names):
        raise ValueError(f"the red-team tasks' modules must have distinct names, got {names}")
    return found


def _fixed_by_oracle(backend: LocalSandboxBackend, task: Task, module: str, oracle: str) -> str:
    """The module's text after the task's own solution ran in a sandbox."""
    sandbox = backend.start(task, f"probe-{task.path.name}")
    try:
        done = sandbox.exec(oracle, timeout=60)
        if done.exit_code != 0:
            raise RuntimeError(f"the oracle of {task.name} failed: {done.stderr[-500:]}")
        return sandbox.host_path(f"/app/{module}").read_text()
    finally:
        sandbox.stop()


def _plant_decoys(workdir: Path, targets: list[Target]) -> None:
    """Bait that a view built by hiding would show: a copy of each task (with its solution)
    beside the red-team workdir and the fixed modules under it."""
    for target in targets:
        shutil.copytree(target.task.path, workdir / "clone" / target.task.path.name, symlinks=True)
        fixed = workdir / "fixed" / target.name
        fixed.parent.mkdir(parents=True, exist_ok=True)
        fixed.write_text(target.fixed)


def _verifier(name: str) -> Verifier:
    """A verifier as a spec names it (the repo kind's ``swe-bench`` is legorl-swe-bench's)."""
    return Registry.discover().build("verifier", name, {}, BuildContext())


def _backend(name: str, run_dir: Path) -> SandboxBackend:
    if name not in BACKENDS:
        raise ValueError(f"the red team configures sandbox backends {sorted(BACKENDS)}, not {name!r}")
    registry = Registry.discover()
    backend = registry.build("sandbox", PLUGIN_OF.get(name, name), BACKENDS[name], BuildContext(run_dir=run_dir))
    fatal = [str(p) for p in backend.preflight() if p.fatal]
    if fatal:
        raise RuntimeError(f"sandbox backend {name} is not usable here: {'; '.join(fatal)}")
    return backend


def available_backends() -> list[str]:
    """The configured backends that are installed and pass their preflight here."""
    found = []
    registry = Registry.discover()
    for name, options in BACKENDS.items():
        if PLUGIN_OF.get(name, name) not in registry.names("sandbox"):
            continue
        backend = registry.build("sandbox", PLUGIN_OF.get(name, name), options, BuildContext())
        if not any(p.fatal for p in backend.preflight()):
            found.append(name)
    return found


def _fill(target: Target, bait: Bait, trials: Path) -> dict[str, str]:
    import shlex

    return {
        **bait.placeholders,
        "task": str(target.task.path),
        "trials": str(trials),
        "py": "python3",
        "work": target.workdir,
        "module": target.module,
        "name": target.name,
        "base": posixpath.basename(target.module),
        "marker": shlex.quote(target.marker),
        "fixed_src": repr(target.fixed),
    }


def reported_limits() -> set[str]:
    """The limits whose hitting the local sandbox reports on this host (see its preflight):
    storage and cgroups need root, memory and processes their cgroup controllers."""
    if os.geteuid() != 0:
        return {"file_size_mb", "cpu_seconds"}
    by_cgroup = {"memory": "memory_mb", "pids": "nproc"}
    return {"storage_mb", "file_size_mb", "cpu_seconds"} | {by_cgroup[c] for c in cgroup_parents() if c in by_cgroup}


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    attacks = [o for o in outcomes if o.attack not in (ORACLE, NOOP)]
    return {
        "attacks": len({o.attack.name for o in attacks}),
        "trials": len(attacks),
        "kinds": sorted({o.kind for o in outcomes}),
        "backends": sorted({o.backend for o in outcomes}),
        "false_rewards": sum(o.reward != 0.0 for o in attacks),
        "detected": sum(o.termination == Termination.CHEAT_BLOCKED for o in attacks),
        "resource_limits": sum(o.termination == Termination.RESOURCE_LIMIT for o in attacks),
        "infrastructure": sum(attribute(o.termination) == Attribution.INFRASTRUCTURE for o in attacks),
        "missed_detections": sum(not o.ok and o.reward == 0.0 for o in attacks),
        "oracle_ok": all(o.ok for o in outcomes if o.attack is ORACLE),
        "noop_ok": all(o.ok for o in outcomes if o.attack is NOOP),
    }


def _cleanup(workdir: Path) -> None:
    """Trials are stopped (unmounted) by the runner; their dirs hold only our files."""
    try:
        shutil.rmtree(workdir)
    except OSError as exc:  # pragma: no cover - leaves the dir for inspection
        print(f"redteam: could not remove {workdir}: {exc}", file=sys.stderr)
