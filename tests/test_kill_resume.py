"""Killed runs resume with no lost or twice-counted trial.

Unit: a pool restored from a checkpoint takes back, from the run store, the trials the
killed run finished after it (sampled with the checkpoint's weights) instead of running
them again, and never reuses a trial name. End to end: a real `legorl apply` killed mid-step
(SIGKILL to its process group, then SIGTERM) and run again into the same output dir resumes
from its last checkpoint: every step is trained once, no trial is counted twice, and no
trial finished before a kill is lost.

"Counted" trials are those of the batches handed to the trainer: each step's latest
``rollout`` event names them (a step re-done after a kill writes a later event).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_scheduler import make_pool

from lego_rl.data import TrialResult
from lego_rl.engine.pool import RolloutPool
from lego_rl.engine.resume import Recovered, engine_state, restore_pool, slot_of
from lego_rl.engine.simulate import lognormal_plan
from lego_rl.kinds import Event
from lego_rl.observe.store import STORE_FILE, RunStore, read_steps, read_trials

# The scenario (three real runs of up to HANG_S each) is set up within the first test's
# timeout: 1800 s here (the default per-test timeout is 600 s).
pytestmark = pytest.mark.timeout(1800)


# ------------------------------------------------------------ unit: the pool, simulated time


def attempt(store: RunStore) -> tuple[RolloutPool, Any, Any, Any]:
    """One run of the pool (async, staleness 1) whose finished trials go to ``store``."""
    store.emit(Event("run_start", {}, 0.0))
    plan = lognormal_plan(random.Random(7), median=10.0, sigma=1.0, pass_rate=lambda t: 0.5)
    pool, clock, inference, launcher = make_pool(plan, max_staleness=1, concurrency=6)
    pool.on_trial = lambda r: store.emit(Event("trial_end", {"result": r}, 0.0))
    return pool, clock, inference, launcher


def ids(groups: list[list[TrialResult]]) -> list[str]:
    return [t.trial_id for g in groups for t in g]


def test_a_resumed_pool_reuses_what_the_killed_run_finished_after_its_checkpoint(
    tmp_path: Path,
) -> None:
    store = RunStore(tmp_path)
    pool, clock, inference, _ = attempt(store)
    for step in range(2):
        pool(step)
        clock.sleep(5.0)
        inference.policy_version = step + 1
    state = json.loads(json.dumps(engine_state(pool)))  # the checkpoint: version 2
    assert state["open"], "async work was in flight at the checkpoint"
    killed = {2: ids(pool(2))}
    inference.policy_version = 3
    killed[3] = ids(pool(3))  # trained past the checkpoint, then killed
    newer = {t["trial_id"] for t in stored_trials(tmp_path).values() if t["step"] > 2}
    assert newer, "the killed run sampled with weights the checkpoint does not hold"

    for _ in range(2):  # resumed, killed again before a checkpoint, resumed again
        again, _, inference2, launcher2 = attempt(store)
        before = {t["trial_id"] for t in stored_trials(tmp_path).values()}
        inference2.policy_version = 2
        assert restore_pool(again, state, tmp_path) > 0
        resumed = ids(again(2))
        assert set(resumed) == set(killed[2]), "step 2 is the killed run's, not run again"
        assert isinstance(again.launcher, Recovered)
        assert again.launcher.reused and set(again.launcher.reused) <= before
        inference2.policy_version = 3
        assert not set(ids(again(3))) & newer, "a trial of unsaved weights was trained"
        launched = {j.trial_id for j in launcher2.launched}
        assert not launched & before, "a trial name of an earlier attempt was used again"
    assert again.epoch == 2


def test_slots_come_from_the_pool_names_only() -> None:
    def trial(trial_id: str, group: str, task: str = "fix-a-e1") -> dict[str, Any]:
        return {"trial_id": trial_id, "group": group, "task": task}

    assert slot_of(trial("g00003-fix-a-e1-1", "g00003-fix-a-e1")) == (3, "fix-a-e1", 1)
    assert slot_of(trial("g00003-fix-a-e1-e2-0-r1-e3", "g00003-fix-a-e1-e2")) == (3, "fix-a-e1", 0)
    assert slot_of(trial("g00003-other-1", "g00003-other")) is None
    assert slot_of(trial("probe-1", "")) is None


# ------------------------------------------------------------ end to end: `legorl apply`

ROOT = Path(__file__).resolve().parents[1]
LEGORL = str(Path(sys.executable).parent / "legorl")
STEPS, GROUP = 4, 3
HANG_S = 500
"""How long a run may go without reaching the point it is waited for before the test calls it
hung (a few tens of seconds on an idle machine; the module's timeout allows three of them)."""
OVERRIDES = [
    "run.name=kr",
    f"run.steps={STEPS}",
    "run.tasks_per_step=1",
    f"run.group_size={GROUP}",
    "run.concurrency=1",  # one trial at a time: a kill lands between the members of a group
    "harness.plugin=scripted",  # no model calls: about a second per trial
    'harness.options.commands=["sleep 0.5"]',
]


@dataclass
class Killed:
    """What the store held when a run was killed."""

    checkpoint: int
    """The step the run's last checkpoint continues at."""
    trials: dict[str, dict[str, Any]]
    """Trial id -> stored result, of every trial finished before the kill."""
    counted: dict[int, list[str]]
    """Step -> trial ids trained at that step, of the steps finished before the kill."""
    returncode: int
    log: str
    leftover: bool
    """Whether a process of its process group outlived it."""


@dataclass
class Scenario:
    run_dir: Path
    kills: list[Killed]
    """SIGKILL (first run), then SIGTERM (second run); the third runs to the end."""
    log: str
    """The third run's output."""
    launched: list[float]
    """When each resumed run was started (wall time)."""


def launch(out: Path) -> subprocess.Popen[str]:
    spec = str(ROOT / "specs" / "mini-swe-agent-local.yaml")
    return subprocess.Popen(
        [LEGORL, "apply", spec, f"run.output_dir={out}", *OVERRIDES],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, sandboxes included
    )


def query(run_dir: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Rows of a read-only query of the run store, written to meanwhile (WAL)."""
    if not (run_dir / STORE_FILE).is_file():
        return []
    db = sqlite3.connect(f"file:{run_dir / STORE_FILE}?mode=ro", uri=True, timeout=10)
    try:
        return db.execute(sql, args).fetchall()
    except sqlite3.OperationalError:  # no event written yet: no tables
        return []
    finally:
        db.close()


def stored_trials(run_dir: Path) -> dict[str, dict[str, Any]]:
    if not (run_dir / STORE_FILE).is_file():
        return {}
    try:
        return {t["trial_id"]: t for t in read_trials(run_dir)}
    except sqlite3.OperationalError:  # no event written yet: no tables
        return {}


def events(run_dir: Path, kind: str) -> list[tuple[float, dict[str, Any]]]:
    rows = query(run_dir, "SELECT time, data FROM events WHERE kind = ? ORDER BY id", kind)
    return [(t, json.loads(d)) for t, d in rows]


def counted(run_dir: Path) -> dict[int, list[str]]:
    """Step -> trial ids of its batch (latest rollout event), for the steps trained."""
    done = {s["step"] for s in read_steps(run_dir)}
    latest = {e["step"]: e["trials"] for _, e in events(run_dir, "rollout")}
    return {s: ids for s, ids in sorted(latest.items()) if s in done}


def checkpoint_step(run_dir: Path) -> int | None:
    """The step ``checkpoints/last`` continues at, once one is complete."""
    last = run_dir / "checkpoints" / "last"
    if not (last / "trainer.pt").is_file():
        return None
    return int(last.resolve().name.removeprefix("state-"))


def survivors(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _ppid, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, IndexError):
            continue  # ended meanwhile
        if int(group) == pgid and state != "Z":
            alive.append(int(stat.parent.name))
    return alive


def kill_mid_step(proc: subprocess.Popen[str], run_dir: Path, sig: int, after: int) -> Killed:
    """Once a checkpoint at step >= ``after`` exists and a trial of the step after it has
    finished (the run is mid-step), send ``sig`` (SIGKILL: to the whole process group)."""
    started = time.monotonic()
    while True:
        if proc.poll() is not None:
            pytest.fail(f"the run ended before it was killed:\n{proc.stdout.read()[-4000:]}")
        if time.monotonic() - started > HANG_S:  # a guard against a hung run, not a speed test
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"no checkpoint and finished trial after it within {HANG_S} s")
        step = checkpoint_step(run_dir)
        if step is not None and after <= step < STEPS:
            if any(t["step"] >= step for t in stored_trials(run_dir).values()):
                break
        time.sleep(0.05)
    if sig == signal.SIGKILL:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    log, _ = proc.communicate(timeout=HANG_S)
    ending = time.monotonic() + 10  # what SIGTERM's stop signalled gets a moment to end
    while (leftover := bool(survivors(proc.pid))) and time.monotonic() < ending:
        time.sleep(0.05)
    if leftover:
        os.killpg(proc.pid, signal.SIGKILL)
    step = checkpoint_step(run_dir)  # it may have moved on between the poll and the kill
    assert step is not None
    return Killed(step, stored_trials(run_dir), counted(run_dir), proc.returncode, log, leftover)


def unmount_under(path: Path) -> None:
    """Detach mounts a killed run's sandboxes left under ``path`` (root only mounts)."""
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    points = [m.split()[1] for m in mounts if m.split()[1].startswith(f"{path}/")]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    out = tmp_path_factory.mktemp("runs")
    run_dir = out / "kr"
    try:
        kills = [kill_mid_step(launch(out), run_dir, signal.SIGKILL, after=1)]
        launched = [time.time()]
        kills.append(kill_mid_step(launch(out), run_dir, signal.SIGTERM, kills[0].checkpoint + 1))
        launched.append(time.time())
        proc = launch(out)
        log, _ = proc.communicate(timeout=HANG_S)
        assert proc.returncode == 0, log[-4000:]
        yield Scenario(run_dir, kills, log, launched)
    finally:
        unmount_under(out)


def line_ending(log: str, text: str) -> bool:
    """Whether a line of ``log`` ends with ``text``, whole (stderr shares the pipe: a library's
    progress bar may precede it on its line)."""
    return any(line.endswith(text) for line in log.splitlines())


@pytest.mark.slow
def test_each_run_resumes_at_its_checkpoint_step(scenario: Scenario) -> None:
    resumes = events(scenario.run_dir, "resume")
    assert [r["step"] for _, r in resumes] == [k.checkpoint for k in scenario.kills]
    assert all(r["step"] >= 1 for _, r in resumes), "a resumed run started again from step 0"
    logs = [scenario.kills[1].log, scenario.log]
    for (_, resume), log in zip(resumes, logs, strict=True):
        said = f"resumed from {resume['path']} at step {resume['step'] + 1}"
        assert line_ending(log, said), f"no line ends with {said!r}:\n{log[-3000:]}"
    starts = events(scenario.run_dir, "run_start")
    assert [s["resumed_from"] is not None for _, s in starts] == [False, True, True]
    seconds = [t - launched for (t, _), launched in zip(resumes, scenario.launched, strict=True)]
    print(f"checkpoints at the kills: {[k.checkpoint for k in scenario.kills]}, "
          f"launch to resumed state: {[round(s, 1) for s in seconds]} s")


@pytest.mark.slow
def test_sigkill_leaves_nothing_to_say_and_sigterm_stops_cleanly(scenario: Scenario) -> None:
    hard, soft = scenario.kills
    assert hard.returncode == -signal.SIGKILL
    assert soft.returncode not in (0, -signal.SIGTERM), "SIGTERM must be handled, not fatal"
    assert not soft.leftover, "a process of the SIGTERM-ed run outlived it"
    run_dir = scenario.run_dir
    again = f"): the same command again resumes {run_dir} from {run_dir}/checkpoints/last"
    assert line_ending(soft.log, again), soft.log[-3000:]
    ends = [e["status"] for _, e in events(scenario.run_dir, "run_end")]
    assert ends == ["interrupted", "ok"]


@pytest.mark.slow
def test_every_step_trained_once_and_no_trial_counted_twice(scenario: Scenario) -> None:
    assert [s["step"] for s in read_steps(scenario.run_dir)] == list(range(STEPS))
    final = counted(scenario.run_dir)
    assert sorted(final) == list(range(STEPS))
    trained = [tid for batch in final.values() for tid in batch]
    assert len(trained) == STEPS * GROUP and len(set(trained)) == len(trained), final
    assert set(trained) <= set(stored_trials(scenario.run_dir)), "a trained trial is not stored"
    for kill in scenario.kills:  # steps finished before a kill were not trained again
        assert {s: final[s] for s in kill.counted} == kill.counted
    print(f"trials stored: {len(stored_trials(scenario.run_dir))}, counted: {len(trained)}")


@pytest.mark.slow
def test_no_trial_finished_before_a_kill_is_lost(scenario: Scenario) -> None:
    stored = stored_trials(scenario.run_dir)
    trained = {tid for batch in counted(scenario.run_dir).values() for tid in batch}
    reused = 0
    for kill in scenario.kills:
        for tid, result in kill.trials.items():
            assert stored.get(tid) == result, f"{tid} lost or overwritten by a later run"
            finished = result["attribution"] != "infrastructure" and result["termination"] != "cancelled"
            if result["step"] >= kill.checkpoint and finished:
                assert tid in trained, f"{tid} finished after the checkpoint but was run again"
                reused += 1
    assert reused, "no kill landed after a trial of an unsaved step had finished"
    kept = " trials finished after the checkpoint are kept for reuse"
    assert line_ending(scenario.kills[1].log, kept) or line_ending(scenario.log, kept)
