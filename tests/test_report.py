"""The end-of-run report: figures from a run store, the PNG, the CLI, the dashboard's share of
it, and ``legorl bench learn``'s aggregation over seeds.

The runs here are written through the store observer's real API with synthetic events (a
test double of a run): 12 steps whose reward climbs by 0.05 a step, two training trials a
step with known phase timings and model calls, and held-out trials and evaluation events
that must stay out of every training figure.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lego_rl.bench.learn import aggregate, parse, seed_figures
from lego_rl.cli.main import app
from lego_rl.data import CallRecord, PhaseTiming, Termination, TrialResult
from lego_rl.kinds import Event
from lego_rl.observe.reader import RunReader
from lego_rl.observe.report import (
    moving_mean,
    read_report,
    reward_windows,
    write_report,
)
from lego_rl.observe.store import RunStore, read_reward_hacking
from lego_rl.observe.view import RunView

T0 = 1_000_000.0
PHASES = {"sandbox_start": 1.0, "anticheat_before_agent": 0.5, "agent": 5.0, "verify": 2.0,
          "sandbox_stop": 0.5}  # fmt: skip
"""Each training trial's phases; its two model calls take 1.5 s each (3 s of the agent's 5)."""


def trial(store: RunStore, trial_id: str, step: int, group: str, phases: dict[str, float],
          reward: float = 1.0, termination: Termination = Termination.COMPLETED) -> None:  # fmt: skip
    for index in range(2):
        start = T0 + step * 10 + index * 2
        record = CallRecord(session=trial_id, index=index, dialect="openai-chat", prompt_ids=[1],
                            completion_ids=[2, 3], logprobs=[-0.1, -0.2], started_at=start,
                            ended_at=start + 1.5)  # fmt: skip
        store.emit(Event("call", {"record": record}, start + 1.5))
    result = TrialResult(
        trial_id=trial_id, task="t", group=group, step=step, reward=reward,
        termination=termination, timings=[PhaseTiming(phase=p, seconds=s) for p, s in phases.items()],
    )  # fmt: skip
    store.emit(Event("trial_end", {"result": result}, T0 + step * 10 + 9))


def evaluation(store: RunStore, label: str, version: int, success: float, edit: float, verified: float = 0.5) -> None:
    for i in range(2):  # held-out trials: slow verifier, never a training step's
        trial(store, f"eval-{label}-{i}", version, f"eval-{label}", {"verify": 100.0},
              termination=Termination.MAX_TURNS)  # fmt: skip
    data = {
        "label": label, "policy_version": version, "samples": 8, "scored": 8,
        "infrastructure_failures": 0, "success": success,
        "terminations": {"completed": 6, "max_turns": 2}, "per_task": {"t": success},
        "behaviour": {"trials": 8, "edit_share": edit, "verified_after_edit": verified,
                      "tests_after_change": 0.25, "files_before_edit": 1.5},
        "seconds": 30.0, "constant_baseline": 0.375, "blind_baseline": 0.5,
    }  # fmt: skip
    store.emit(Event("evaluation", data, T0 + version * 10 + 5))


def make_run(run_dir: Path, steps: int = 12, evaluations: bool = True) -> Path:
    store = RunStore(run_dir)
    store.emit(Event("run_start", {"spec": {"run": {"name": "synthetic"}}, "run_dir": str(run_dir)}, T0))
    if evaluations:
        evaluation(store, "before", 0, 0.25, 0.5)
    for step in range(steps):
        for i in range(2):  # drawn trials: half rewarded in the first half of the run, then all
            trial(store, f"s{step}-{i}", step, f"g{step}", PHASES, reward=float(i == 0 or 2 * step >= steps))
        metrics = {
            "step": step, "reward_mean": step * 0.05, "groups": 4, "informative_groups": step % 3,
            "step_seconds": 10.0, "rollout_seconds": 8.0, "logp_diff_abs": 0.01 * (step + 1),
            "k3_kl": 0.001, "routing_agreement": 0.99,
            "prob_pearson": float("nan") if step == 0 else 0.999,
        }  # fmt: skip
        store.emit(Event("step", metrics, T0 + step * 10 + 10))
    if evaluations:
        evaluation(store, "after", steps, 0.625, 0.75, verified=0.875)
    store.emit(Event("run_end", {"status": "ok"}, T0 + 600))
    store.close()
    return run_dir


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", "not a PNG"
    return struct.unpack(">II", head[16:24])


def test_windows_and_moving_mean() -> None:
    assert reward_windows([0.0, 1.0, 1.0]) == (0.0, 1.0, 1)
    assert reward_windows([0.5]) == (None, None, 0)
    assert reward_windows([0.0] * 10 + [1.0] * 15)[2] == 10
    assert moving_mean([0.0, 1.0, None, 1.0], window=2) == [0.0, 0.5, 1.0, 1.0]


def test_report_figures_from_a_store(tmp_path: Path) -> None:
    path = write_report(make_run(tmp_path / "run"))
    assert path == tmp_path / "run" / "report" / "report.json"
    r = json.loads(path.read_text())  # strict JSON: the NaN Pearson became null
    assert r["name"] == "synthetic" and r["status"] == "ok" and r["steps"] == 12
    assert r["window"] == 6  # min(10, 12 // 2)
    assert (r["reward_first10"], r["reward_last10"]) == (0.5, 1.0)  # every trial drawn
    assert r["gain"] == pytest.approx(0.5) and r["curve"]["reward_mean"][:2] == [0.5, 0.5]
    assert r["reward_trained_first10"] == pytest.approx(0.125)  # steps 0..5: 0.05 * 2.5
    assert r["reward_trained_last10"] == pytest.approx(0.425)  # steps 6..11: 0.05 * 8.5
    assert r["gain_trained"] == pytest.approx(0.3)
    assert (r["heldout_before"], r["heldout_after"]) == (0.25, 0.625)
    assert r["heldout_gain"] == pytest.approx(0.375)
    assert r["heldout"]["after"]["policy_version"] == 12
    assert r["behaviour"]["before"]["edit_share"] == 0.5 and r["behaviour"]["after"]["edit_share"] == 0.75
    assert r["verified_after_edit_gain"] == pytest.approx(0.375) and r["tests_after_change_gain"] == 0.0
    assert r["curve"]["verified_after_edit"] == [None] * 12  # the synthetic trials call no tool
    assert r["minutes"] == pytest.approx(10.0)
    assert r["informative_share"] == pytest.approx(sum(s % 3 for s in range(12)) / 48)
    assert r["curve"]["informative_share"][:3] == [0.0, 0.25, 0.5]
    assert r["curve"]["moving_mean"][11] == pytest.approx((4 * 0.5 + 6 * 1.0) / 10)
    assert r["curve"]["reward_trained"][11] == pytest.approx(0.55)
    assert r["consistency"]["logp_diff_abs"]["first"] == pytest.approx(0.01)
    assert r["consistency"]["logp_diff_abs"]["last"] == pytest.approx(0.12)
    assert r["consistency"]["k3_kl"]["mean"] == pytest.approx(0.001)
    assert r["consistency"]["routing_agreement"]["mean"] == pytest.approx(0.99)
    assert r["consistency"]["prob_pearson"]["first"] == pytest.approx(0.999)  # NaN skipped
    # held-out trials (max_turns, 100 s verifier) count in no training figure
    assert r["terminations"]["training"] == {"completed": 24}
    assert r["terminations"]["heldout_after"] == {"completed": 6, "max_turns": 2}
    # per trial: generation 3 s, harness+sandbox (5 - 3) + 1 + 0.5 + 0.5 = 4 s, verifier 2 s;
    # the 8 s of rollout wall time shared 3:4:2, training 10 - 8
    split = r["time_split"]
    assert split["per_trial"] == {
        "generation_s": 3.0, "harness_sandbox_s": 4.0, "verifier_s": 2.0, "phases": PHASES,
    }  # fmt: skip
    assert split["mean"] == pytest.approx(
        {"generation_s": 8 * 3 / 9, "harness_sandbox_s": 8 * 4 / 9, "verifier_s": 8 * 2 / 9,
         "training_s": 2.0}
    )  # fmt: skip
    assert [row["trials"] for row in split["per_step"]] == [2] * 12
    width, height = png_size(tmp_path / "run" / "report" / "reward_curve.png")
    assert width >= 600 and height >= 400
    assert (tmp_path / "run" / "report" / "reward_curve.png").stat().st_size > 20_000
    md = (tmp_path / "run" / "report" / "report.md").read_text()
    assert "reward_curve.png" in md and "| held-out success (before, after) | 0.25 | 0.625 | 0.375 |" in md
    assert r["heldout"]["before"]["constant_baseline"] == r["heldout_baseline"] == 0.375
    assert "most common held-out fix would score 0.375" in md
    assert r["heldout_blind_baseline"] == 0.5 and r["heldout_over_blind"] == pytest.approx(0.125)
    assert "would score 0.5" in md


def test_a_one_step_run_without_evaluations_still_reports(tmp_path: Path) -> None:
    write_report(make_run(tmp_path / "run", steps=1, evaluations=False))
    r = read_report(tmp_path / "run")
    assert r is not None and r["steps"] == 1
    for key in ("reward_first10", "reward_last10", "gain", "heldout_before", "heldout_after",
                "heldout_gain"):  # fmt: skip
        assert r[key] is None, key
    assert r["heldout"] == {} and r["behaviour"] == {}
    assert r["time_split"]["mean"]["training_s"] == pytest.approx(2.0)
    assert png_size(tmp_path / "run" / "report" / "reward_curve.png")[0] > 0


def test_cli_writes_the_report_and_prints_the_headline(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    result = CliRunner().invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert str(run_dir / "report" / "report.json") in result.output.replace("\n", "")
    assert "heldout_gain" in result.output and "0.375" in result.output
    assert (run_dir / "report" / "reward_curve.png").is_file()
    missing = CliRunner().invoke(app, ["report", str(tmp_path / "nothing")])
    assert missing.exit_code == 1 and "store.sqlite" in missing.output


def test_dashboard_data_carries_report_and_evaluations(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    view = RunView(RunReader(run_dir))
    data = view.data()
    assert data["report"] is None  # not written yet; held-out comes from the events
    assert [(e["label"], e["success"]) for e in data["evaluations"]] == [("before", 0.25), ("after", 0.625)]
    # held-out trials are listed but belong to no step's row
    assert [row["step"] for row in data["steps"]] == list(range(12))
    assert all(row["terminations"] == {"completed": 2} for row in data["steps"])
    assert len(data["trials"]) == 24 + 4
    assert data["steps"][11]["reward_mean10"] == pytest.approx(0.8)  # every trial drawn
    assert data["steps"][11]["reward_trained"] == pytest.approx(0.55)
    write_report(run_dir)
    assert view.data()["report"]["gain"] == pytest.approx(0.5)


def hacking_trial(store: RunStore, trial_id: str, step: int, reward: float, patterns: tuple[str, ...] = (),
                  evidence: tuple[str, ...] = (), group: str = "g", blocked: bool = False) -> None:  # fmt: skip
    """A training trial; flagged by the reward-hacking policy when it names patterns or evidence."""
    verifier: dict[str, Any] = {"exit_code": 0}
    if patterns or evidence:
        flags = [{"file": "/app/calc.py", "lineno": 3, "pattern": p, "kind": "exit", "line": "x",
                  "crossed": True} for p in patterns]  # fmt: skip
        verifier["reward_hacking"] = {"flags": flags, "flags_total": len(flags),
                                      "evidence": list(evidence), "blocked": blocked}  # fmt: skip
    result = TrialResult(
        trial_id=trial_id, task="t", group=group, step=step, reward=reward, verifier=verifier,
        termination=Termination.CHEAT_BLOCKED if blocked else Termination.COMPLETED,
    )  # fmt: skip
    store.emit(Event("trial_end", {"result": result}, T0 + step * 10 + 9))


def hacking_run(run_dir: Path) -> Path:
    """Three steps of four trials: step 0 two rewarded, one of them flagged, and one unrewarded
    trial with the verifier's evidence only; step 1 nothing rewarded, one trial blocked; step 2
    all rewarded, one flagged twice over. A flagged held-out trial counts nowhere."""
    store = RunStore(run_dir)
    spec = {"run": {"name": "hacking"}, "anticheat": [{"plugin": "reward-hacking"}]}
    store.emit(Event("run_start", {"spec": spec, "run_dir": str(run_dir)}, T0))
    hacking_trial(store, "s0-0", 0, 1.0, ("os-exit",))
    hacking_trial(store, "s0-1", 0, 1.0)
    hacking_trial(store, "s0-2", 0, 0.0, evidence=("result stream: line 2 is not a report event",))
    hacking_trial(store, "s0-3", 0, 0.0)
    hacking_trial(store, "s1-0", 1, 0.0, ("runner-in-sys-modules",), blocked=True)
    for i in range(1, 4):
        hacking_trial(store, f"s1-{i}", 1, 0.0)
    hacking_trial(store, "s2-0", 2, 1.0, ("os-exit", "reward-dir"))
    for i in range(1, 4):
        hacking_trial(store, f"s2-{i}", 2, 1.0)
    hacking_trial(store, "eval-after-0", 2, 1.0, ("os-exit",), group="eval-after")
    for step in range(3):
        store.emit(Event("step", {"step": step, "reward_mean": 0.5, "groups": 1}, T0 + step * 10 + 10))
    store.emit(Event("run_end", {"status": "ok"}, T0 + 60))
    store.close()
    return run_dir


def test_the_store_counts_flagged_trials_per_step(tmp_path: Path) -> None:
    run_dir = hacking_run(tmp_path / "run")
    expected = {
        0: {"reward_hacking_flags": 2, "reward_hacking_rewarded": 0.5},
        1: {"reward_hacking_flags": 1, "reward_hacking_rewarded": None},  # nothing rewarded
        2: {"reward_hacking_flags": 1, "reward_hacking_rewarded": 0.25},
    }
    assert read_reward_hacking(run_dir) == expected
    rows = RunView(RunReader(run_dir)).data()["steps"]
    assert {r["step"]: {k: r[k] for k in expected[0]} for r in rows} == expected
    unflagged = RunView(RunReader(make_run(tmp_path / "plain", steps=2, evaluations=False))).data()
    assert [r["reward_hacking_flags"] for r in unflagged["steps"]] == [0, 0]


def test_the_report_has_a_reward_hacking_section(tmp_path: Path) -> None:
    run_dir = hacking_run(tmp_path / "run")
    r = json.loads(write_report(run_dir).read_text())
    h = r["reward_hacking"]
    assert (h["watched"], h["flagged"], h["trials"], h["rewarded"], h["rewarded_flagged"]) == (True, 4, 12, 6, 2)
    assert h["rewarded_share"] == pytest.approx(1 / 3)
    assert (h["with_evidence"], h["blocked"]) == (1, 1)
    assert h["patterns"] == {"os-exit": 2, "runner-in-sys-modules": 1, "reward-dir": 1}
    assert [s["reward_hacking_flags"] for s in h["per_step"]] == [2, 1, 1]
    md = (run_dir / "report" / "report.md").read_text()
    assert "## Reward hacking" in md
    assert ("Flagged: 4 of 12 training trials; 2 of 6 rewarded trials (0.333); 1 blocked; "
            "by step: 0 (2), 1 (1), 2 (1).") in md  # fmt: skip
    assert "Patterns (trials): os-exit 2, runner-in-sys-modules 1, reward-dir 1." in md
    assert "came with 1 of them" in md


def test_the_report_names_each_termination_met_with_its_attribution(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    r = json.loads(write_report(run_dir).read_text())
    assert r["attribution"] == {"completed": "none", "max_turns": "policy"}
    md = (run_dir / "report" / "report.md").read_text()
    assert "| termination | attribution | training | heldout_before | heldout_after | why |" in md
    assert "| `max_turns` | policy | 0 | 2 | 2 | The agent used up its model calls" in md
    assert "| `completed` | none | 24 | 6 | 6 |" in md
    assert "`cheat_blocked`" not in md  # only what the run met
    assert "Not watched: the run's anti-cheat list has no `reward-hacking` policy." in md
    blocked = json.loads(write_report(hacking_run(tmp_path / "hacking")).read_text())
    assert blocked["attribution"] == {"cheat_blocked": "policy", "completed": "none"}


def report_file(run_dir: Path, **figures: Any) -> Path:
    """A report.json holding the given figures (what a seed's run would have written)."""
    (run_dir / "report").mkdir(parents=True)
    split = {k: figures.pop(k) for k in list(figures) if k.endswith("_s")}
    (run_dir / "report" / "report.json").write_text(
        json.dumps({**figures, "time_split": {"mean": split}})
    )
    return run_dir


def test_bench_learn_aggregates_seed_reports(tmp_path: Path) -> None:
    keys = ("reward_first10", "reward_last10", "gain", "heldout_before", "heldout_after",
            "heldout_gain", "heldout_over_blind", "minutes", "generation_s", "harness_sandbox_s",
            "verifier_s", "training_s")  # fmt: skip
    rows = [
        (0.2, 0.6, 0.4, 0.3, 0.6, 0.3, 0.1, 9.0, 4.0, 2.0, 1.0, 3.0),
        (0.3, 0.5, 0.2, 0.4, 0.6, 0.2, -0.05, 11.0, 6.0, 4.0, 1.0, 5.0),
        (0.1, 0.5, 0.4, None, None, None, None, 10.0, 5.0, 3.0, 1.0, 4.0),  # no held-out evaluation
    ]
    seeds = [dict(zip(keys, row, strict=True)) for row in rows]
    per_seed = []
    for i, figures in enumerate(seeds):
        run_dir = report_file(tmp_path / f"seed{i}", **figures)
        run = {"seed": i, "rc": 0, "run_dir": str(run_dir), "minutes": 12.0 + i}
        per_seed.append(seed_figures(run, read_report(run_dir)))
    per_seed.append(seed_figures({"seed": 3, "rc": 1, "run_dir": None, "minutes": 0.5}, None))
    out = aggregate(per_seed)
    assert out["seeds"] == 4 and out["failed_seeds"] == [3]
    assert out["reward_first10"] == pytest.approx(0.2)
    assert out["gain"] == pytest.approx(1.0 / 3)
    assert out["heldout_gain"] == pytest.approx(0.25)  # the seed without held-out is left out
    assert out["minutes"] == pytest.approx((12 + 13 + 14 + 0.5) / 4)  # wall time of each apply
    assert out["run_minutes"] == pytest.approx(10.0)  # the stores' own durations
    assert out["generation_s"] == pytest.approx(5.0) and out["training_s"] == pytest.approx(4.0)
    assert out["heldout_over_blind"] == pytest.approx(0.025)
    assert out["targets_met"] == {"heldout_gain": True, "heldout_over_blind": True, "gain": True, "minutes": True}
    assert out["all_targets_met"] is False  # a seed failed
    assert out["per_seed"][0]["heldout_after"] == 0.6
    assert json.loads(json.dumps(out)) == out
    low = aggregate([{**per_seed[1], "gain": 0.1, "minutes": 25.0}])
    assert low["targets_met"] == {"heldout_gain": False, "heldout_over_blind": False, "gain": False, "minutes": False}
    unknown = aggregate([seed_figures({"seed": 0, "rc": 1, "run_dir": None, "minutes": 1.0}, None)])
    assert unknown["heldout_gain"] is None and not unknown["targets_met"]["heldout_gain"]
    assert not math.isnan(unknown["minutes"])


def test_bench_learn_refuses_bad_arguments(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("run: {name: x}\n")
    assert parse(["--spec", str(spec), "--seeds", "2", "run.steps=4"]).overrides == ["run.steps=4"]
    for bad in (["--spec", str(tmp_path / "none.yaml")], ["--spec", str(spec), "--seeds", "0"],
                ["--spec", str(spec), "steps"]):  # fmt: skip
        with pytest.raises(SystemExit):
            parse(bad)
