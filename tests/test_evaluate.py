"""Held-out evaluation: trials run through the runner, summarised into one evaluation event."""

from __future__ import annotations

import threading

from lego_rl.data import Attribution, Termination, TrialResult
from lego_rl.engine.evaluate import blind_baseline, constant_baseline, evaluate, summarize
from lego_rl.kinds import Event, Task


class Runner:
    """Stands in for TrialRunner: task t-0 is solved, t-1 is not, one trial breaks on infrastructure."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int, str]] = []
        self.lock = threading.Lock()

    def run(self, task: Task, trial_id: str, *, step: int = 0, group: str = "") -> TrialResult:
        with self.lock:
            self.calls.append((task.name, trial_id, step, group))
        if trial_id.endswith("00004"):
            return TrialResult(trial_id=trial_id, task=task.name, group=group, step=step,
                               termination=Termination.SANDBOX_ERROR, attribution=Attribution.INFRASTRUCTURE)
        return TrialResult(trial_id=trial_id, task=task.name, group=group, step=step,
                           reward=1.0 if task.name == "t-0" else 0.0)


def tasks(tmp_path) -> list[Task]:
    return [Task(name=f"t-{i}", path=tmp_path, instruction="fix it") for i in range(2)]


def test_evaluation_cycles_tasks_and_emits_success_without_infrastructure_failures(tmp_path):
    runner, events = Runner(), []
    data = evaluate(runner, tasks(tmp_path), samples=6, label="after", concurrency=3, harness="codex",
                    version=7, emit=events.append)  # fmt: skip
    assert sorted(c[1] for c in runner.calls) == [f"eval-after-{i:05d}" for i in range(6)]
    assert {c[2] for c in runner.calls} == {7} and {c[3] for c in runner.calls} == {"eval-after"}
    assert [c[0] for c in sorted(runner.calls, key=lambda c: c[1])] == ["t-0", "t-1"] * 3
    # t-0 solved 3 times, t-1 twice failed, trial 4 (t-0) an infrastructure failure: 2 / 5
    assert data["scored"] == 5 and data["infrastructure_failures"] == 1
    assert data["success"] == 2 / 5
    assert data["per_task"] == {"t-0": 1.0, "t-1": 0.0}
    assert data["terminations"] == {"completed": 5, "sandbox_error": 1}
    assert [e.kind for e in events] == ["evaluation"] and isinstance(events[0], Event)
    assert events[0].data["label"] == "after" and events[0].data["policy_version"] == 7


def test_a_restarted_runs_evaluation_names_its_trials_apart(tmp_path):
    runner = Runner()
    evaluate(runner, tasks(tmp_path), samples=2, label="after", concurrency=1, harness="codex",
             version=7, emit=lambda e: None, attempt=2)  # fmt: skip
    assert sorted(c[1] for c in runner.calls) == ["eval-after-00000-e2", "eval-after-00001-e2"]
    assert {c[3] for c in runner.calls} == {"eval-after"}


def test_summary_of_only_broken_trials_has_no_success_figure():
    broken = TrialResult(trial_id="x", task="t", termination=Termination.SANDBOX_ERROR,
                         attribution=Attribution.INFRASTRUCTURE)  # fmt: skip
    data = summarize([broken], "codex")
    assert data["success"] is None and data["scored"] == 0


def test_constant_baseline_is_the_most_common_oracle_share(tmp_path):
    def task(i: int, fix: str | None) -> Task:
        meta = {"metadata": {"oracle_command": fix}} if fix else {}
        return Task(name=f"t-{i}", path=tmp_path, instruction="fix it", config=meta)

    fixes = ["sed -i 's/</<=/' /app/*.py"] * 3 + ["sed -i 's/+/-/' /app/*.py"] * 2 + ["sed -i 's/0/1/' /app/*.py"]
    assert constant_baseline([task(i, f) for i, f in enumerate(fixes)]) == 3 / 6
    assert constant_baseline([task(0, fixes[0]), task(1, None)]) is None  # a task without an oracle
    assert constant_baseline(tasks(tmp_path)) is None
    events: list[Event] = []
    data = evaluate(Runner(), [task(0, fixes[0]), task(1, fixes[3])], samples=3, label="before", concurrency=1,
                    harness="codex", version=0, emit=events.append)  # fmt: skip
    assert data["constant_baseline"] == 2 / 3  # samples cycle the tasks: t-0, t-1, t-0


def test_blind_baseline_is_the_best_fixed_policy_that_edits_without_testing(tmp_path):
    def task(i: int, fix: str, candidates: list[str]) -> Task:
        meta = {"oracle_command": fix, "candidate_commands": candidates}
        return Task(name=f"t-{i}", path=tmp_path, instruction="fix it", config={"metadata": meta})

    a, b, c = (f"sed -i '6s/x/{x}/' /app/*.py" for x in "abc")
    listed = [task(0, a, [a, b]), task(1, b, [a, b]), task(2, c, [b, c]), task(3, a, [a, c])]
    assert blind_baseline(listed) == 2 / 4  # the first listed fixes t-0 and t-3; no fix is common to 3
    assert blind_baseline([task(i, a, [b, a]) for i in range(3)] + [task(3, b, [b, a])]) == 3 / 4
    # the fix predictable from the candidates alone (whatever their order): a fixed policy learns it
    told = [task(0, a, [a, b]), task(1, a, [b, a]), task(2, c, [b, c]), task(3, c, [c, b]), task(4, a, [a, b]),
            task(5, c, [b, c])]  # fmt: skip
    assert constant_baseline(told) == 3 / 6 and blind_baseline(told) == 1.0
    assert blind_baseline([task(0, a, [a, b]), task(1, b, [a, b])]) == 1 / 2  # the same candidates, either fix
    plain = [task(0, a, []), task(1, a, []), task(2, b, [])]
    assert blind_baseline(plain) == constant_baseline(plain) == 2 / 3  # no candidates: the constant answer
    assert blind_baseline(tasks(tmp_path)) is None  # no oracle
    data = evaluate(Runner(), listed, samples=4, label="before", concurrency=1, harness="codex", version=0,
                    emit=lambda e: None)  # fmt: skip
    assert data["blind_baseline"] == 2 / 4
