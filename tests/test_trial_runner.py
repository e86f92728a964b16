"""TrialRunner: every way a trial can end is recorded with its reason and attribution."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_fakes import NullSandbox

from lego_rl.data import Attribution, ResourceExhausted, Sampling, SandboxFailure, Termination
from lego_rl.engine.resume import fresh_run_dir
from lego_rl.engine.scheduler import TaskCycle
from lego_rl.engine.trial import TrialRunner, TrialSetup
from lego_rl.kinds import HarnessResult, Task, VerifierResult, Violation
from lego_rl.proxy.server import ProxyServer
from lego_rl.testing.scripted_inference import ScriptedInference
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

TASK = Task(name="t", path=Path("/nonexistent"), instruction="fix it")



class FakeBackend:
    def __init__(self, fail: bool = False):
        self.fail = fail
        self.sandboxes: list[NullSandbox] = []

    def preflight(self):
        return []

    def start(self, task, trial_id):
        if self.fail:
            raise OSError("no space left on device")
        self.sandboxes.append(NullSandbox())
        return self.sandboxes[-1]


class FakeHarness:
    dialect = "openai-chat"

    def __init__(self, outcome: HarnessResult | Exception):
        self.outcome = outcome
        self.endpoints = []

    def preflight(self):
        return []

    def run(self, sandbox, task, endpoint, timeout):
        self.endpoints.append(endpoint)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


class FakeVerifier:
    def __init__(self, verdict: VerifierResult | Exception):
        self.verdict = verdict

    def score(self, sandbox, task):
        if isinstance(self.verdict, Exception):
            raise self.verdict
        return self.verdict


class Flagging:
    name = "flag"

    def before_agent(self, sandbox, task):
        return []

    def before_verify(self, sandbox, task):
        return [Violation("flag", "tests were edited")]

    def after(self, sandbox, task, result):
        return []


def runner(harness, verifier, backend=None, anticheat=()):
    from legorl_std.dialects.openai_chat import OpenAIChatDialect

    proxy = ProxyServer(
        ScriptedInference(tiny_chat_tokenizer(), []),
        {"openai-chat": OpenAIChatDialect()},
        model_name="policy",
    )
    setup = TrialSetup(
        sandbox=backend or FakeBackend(),
        harness=harness,
        verifier=verifier,
        proxy=proxy,
        dialect="openai-chat",
        model_name="policy",
        sampling=Sampling(),
        anticheat=list(anticheat),
    )
    return TrialRunner(setup), setup


def test_completed_trial_takes_the_verifier_reward() -> None:
    run, setup = runner(FakeHarness(HarnessResult(Termination.COMPLETED)), FakeVerifier(VerifierResult(1.0)))
    result = run.run(TASK, "trial-1")
    assert (result.reward, result.termination, result.attribution) == (
        1.0,
        Termination.COMPLETED,
        Attribution.NONE,
    )
    assert setup.sandbox.sandboxes[0].stopped
    endpoint = setup.harness.endpoints[0]
    assert endpoint.base_url.endswith("/s/trial-1") and endpoint.model == "policy"
    assert {t.phase for t in result.timings} >= {"sandbox_start", "agent", "verify", "sandbox_stop"}


def test_sandbox_failure_is_infrastructure() -> None:
    run, _ = runner(FakeHarness(HarnessResult(Termination.COMPLETED)), FakeVerifier(VerifierResult(1.0)), FakeBackend(fail=True))
    result = run.run(TASK, "trial-2")
    assert result.termination == Termination.SANDBOX_ERROR
    assert result.attribution == Attribution.INFRASTRUCTURE
    assert "no space left" in result.reason and result.reward == 0.0


def test_harness_exception_is_a_crash_and_still_verified() -> None:
    run, setup = runner(FakeHarness(RuntimeError("segfault")), FakeVerifier(VerifierResult(0.0)))
    result = run.run(TASK, "trial-3")
    assert result.termination == Termination.HARNESS_CRASH and "segfault" in result.reason
    assert setup.sandbox.sandboxes[0].stopped


def test_a_verifier_that_raises_is_our_internal_error() -> None:
    run, _ = runner(FakeHarness(HarnessResult(Termination.COMPLETED)), FakeVerifier(ValueError("bad toml")))
    result = run.run(TASK, "trial-4")
    assert result.termination == Termination.INTERNAL_ERROR and "bad toml" in result.reason
    assert result.reward == 0.0 and result.attribution == Attribution.INFRASTRUCTURE


@pytest.mark.parametrize("where", ["harness", "verifier"])
def test_a_sandbox_that_breaks_mid_trial_ends_it_sandbox_error(where: str) -> None:
    broke = SandboxFailure("container c1 stopped under the command (exit code 137)")
    harness = FakeHarness(broke if where == "harness" else HarnessResult(Termination.COMPLETED))
    verifier = FakeVerifier(broke if where == "verifier" else VerifierResult(1.0))
    run, setup = runner(harness, verifier)
    result = run.run(TASK, f"trial-broke-{where}")
    assert (result.termination, result.attribution, result.reward) == (Termination.SANDBOX_ERROR, Attribution.INFRASTRUCTURE, 0.0)
    assert result.reason == "sandbox: SandboxFailure: container c1 stopped under the command (exit code 137)"
    assert ("verify" in {t.phase for t in result.timings}) == (where == "verifier"), "a broken sandbox is not verified"
    assert setup.sandbox.sandboxes[0].stopped


@pytest.mark.parametrize("where", ["harness", "verifier"])
def test_a_sandbox_the_agent_exhausted_ends_the_trial_as_the_policys_resource_limit(where: str) -> None:
    full = ResourceExhausted("storage_mb=64 (agent phase: the agent filled the container's storage)")
    harness = FakeHarness(full if where == "harness" else HarnessResult(Termination.COMPLETED))
    verifier = FakeVerifier(full if where == "verifier" else VerifierResult(1.0))
    run, setup = runner(harness, verifier)
    result = run.run(TASK, f"trial-full-{where}")
    assert (result.termination, result.attribution, result.reward) == (Termination.RESOURCE_LIMIT, Attribution.POLICY, 0.0)
    assert result.reason.startswith("storage_mb=64 (agent phase")
    assert setup.sandbox.sandboxes[0].stopped


def test_violation_blocks_the_reward() -> None:
    run, _ = runner(
        FakeHarness(HarnessResult(Termination.COMPLETED)),
        FakeVerifier(VerifierResult(1.0)),
        anticheat=[Flagging()],
    )
    result = run.run(TASK, "trial-5")
    assert result.termination == Termination.CHEAT_BLOCKED and result.reward == 0.0
    assert "tests were edited" in result.reason
    assert result.attribution == Attribution.POLICY


def test_max_turns_from_the_harness_keeps_the_reward() -> None:
    run, _ = runner(FakeHarness(HarnessResult(Termination.MAX_TURNS, reason="limit")), FakeVerifier(VerifierResult(1.0)))
    result = run.run(TASK, "trial-6")
    assert result.termination == Termination.MAX_TURNS and result.reward == 1.0


def test_task_cycle_covers_every_task_before_repeating() -> None:
    tasks = [Task(name=f"t{i}", path=Path("/x"), instruction="i") for i in range(5)]
    cycle = TaskCycle(tasks, seed=3)
    first = [t.name for t in cycle.take(5)]
    assert sorted(first) == [f"t{i}" for i in range(5)]
    assert [t.name for t in TaskCycle(tasks, seed=3).take(5)] == first
    with pytest.raises(ValueError, match="no tasks"):
        TaskCycle([], seed=0)


def test_fresh_run_dir_never_reuses_a_run(tmp_path: Path) -> None:
    wanted = tmp_path / "run"
    assert fresh_run_dir(wanted) == wanted
    wanted.mkdir()
    (wanted / "store.sqlite").write_text("")
    assert fresh_run_dir(wanted) == tmp_path / "run-2"


def test_task_cycle_state_round_trips_through_json() -> None:
    import json

    tasks = [Task(name=f"t{i}", path=Path("/x"), instruction="i") for i in range(4)]
    cycle = TaskCycle(tasks, seed=1)
    cycle.take(3)
    saved = json.loads(json.dumps(cycle.state()))
    expected = [t.name for t in cycle.take(6)]
    again = TaskCycle(tasks, seed=99)
    again.restore(saved)
    assert [t.name for t in again.take(6)] == expected


# ---------------------------------------------------------------- faults through the real pool


class CallingHarness:
    """Makes one real model call through the proxy and reports what the harness would."""

    dialect = "openai-chat"

    def preflight(self):
        return []

    def run(self, sandbox, task, endpoint, timeout):
        import httpx

        reply = httpx.post(
            f"{endpoint.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {endpoint.api_key}"},
            json={"model": endpoint.model, "messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        )
        if reply.status_code >= 500:
            return HarnessResult(Termination.HARNESS_CRASH, exit_code=1, reason=reply.text[:200])
        return HarnessResult(Termination.COMPLETED, exit_code=0)


def test_backend_5xx_is_an_api_error_of_the_infrastructure() -> None:
    run, setup = runner(CallingHarness(), FakeVerifier(VerifierResult(0.0)))
    setup.proxy.handler.inference.replies = [RuntimeError("CUDA out of memory")]
    setup.proxy.start()
    try:
        result = run.run(TASK, "trial-5xx")
    finally:
        setup.proxy.stop()
    assert result.termination == Termination.API_ERROR
    assert result.attribution == Attribution.INFRASTRUCTURE
    assert result.call_versions == []


@pytest.mark.parametrize("termination", [Termination.VERIFIER_TIMEOUT, Termination.VERIFIER_ERROR])
def test_a_verdict_the_tests_give_on_the_agents_code_is_the_policys(termination: Termination) -> None:
    verdict = VerifierResult(0.0, {"reason": "tests ran past 600s"}, termination)
    run, _ = runner(FakeHarness(HarnessResult(Termination.COMPLETED)), FakeVerifier(verdict))
    result = run.run(TASK, "trial-vt")
    assert result.termination == termination and "600s" in result.reason
    assert result.attribution == Attribution.POLICY and result.reward == 0.0


class FlakyHarness:
    """Crashes on a trial's first attempt, completes on a retry; hangs where told to."""

    dialect = "openai-chat"

    def __init__(self, hang: str = ""):
        self.hang = hang

    def preflight(self):
        return []

    def run(self, sandbox, task, endpoint, timeout):
        if self.hang and endpoint.base_url.endswith(self.hang):
            while not sandbox.stopped:  # stuck until the watchdog stops the sandbox
                import time

                time.sleep(0.01)
            return HarnessResult(Termination.HARNESS_CRASH, reason="killed")
        if "-r" not in endpoint.base_url.rsplit("/", 1)[-1]:
            raise RuntimeError("harness segfault")
        return HarnessResult(Termination.COMPLETED)


def real_pool(harness, backend=None, verifier=None, **config):
    from legorl_std.filters import NoFilter

    from lego_rl.engine.clock import ThreadClock
    from lego_rl.engine.launch import ThreadLauncher
    from lego_rl.engine.pool import PoolConfig, RolloutPool

    run, setup = runner(harness, verifier or FakeVerifier(VerifierResult(1.0)), backend)
    cfg = PoolConfig(**{"tasks_per_step": 1, "group_size": 2, "concurrency": 2, **config})
    pool = RolloutPool(
        cfg, TaskCycle([TASK], seed=0), ThreadLauncher(run), ThreadClock(),
        version=lambda: 0, filter=NoFilter(),
    )
    return pool, setup


def test_injected_faults_are_retried_without_stopping_the_run() -> None:
    class FirstStartFails(FakeBackend):
        def start(self, task, trial_id):
            if trial_id.endswith("-1"):
                raise OSError("bwrap: cannot create namespace")
            return super().start(task, trial_id)

    pool, _ = real_pool(FlakyHarness(), FirstStartFails(), retries=1)
    (group,) = pool(0)
    assert sorted(t.trial_id for t in group) == ["g00000-t-0-r1", "g00000-t-1-r1"]
    assert all(t.termination == Termination.COMPLETED and t.reward == 1.0 for t in group)
    assert pool.metrics()["retried_trials"] == 2
    # retries exhausted: the failure stays in the group, attributed to the infrastructure
    pool, _ = real_pool(FlakyHarness(), FakeBackend(fail=True), retries=0)
    (group,) = pool(0)
    assert {(t.termination, t.attribution) for t in group} == {
        (Termination.SANDBOX_ERROR, Attribution.INFRASTRUCTURE)
    }


def test_watchdog_ends_a_hung_trial_and_stops_its_sandbox() -> None:
    import time

    pool, setup = real_pool(FlakyHarness(hang="g00000-t-1-r1"), retries=1, trial_timeout=1.0)
    (group,) = pool(0)  # without the watchdog, the hung trial would never end (test timeout)
    hung = next(t for t in group if t.trial_id == "g00000-t-1-r1")
    assert hung.termination == Termination.AGENT_TIMEOUT and "watchdog" in hung.reason
    assert hung.attribution == Attribution.POLICY
    while not all(s.stopped for s in setup.sandbox.sandboxes):  # until then: the test timeout
        time.sleep(0.02)
