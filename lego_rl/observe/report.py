"""The end-of-run report: ``RUN_DIR/report/`` holds report.json, report.md and reward_curve.png.

Everything comes from the run store (read-only): ``step`` events give the reward curve,
informative groups and consistency figures; ``evaluation`` events the held-out success,
behaviour and terminations before and after training; trials and calls the time split.
Held-out trials (group ``eval-...``) never count in a training step's figures.

Windows: ``reward_first10`` / ``reward_last10`` are means over the first / last
``min(10, steps // 2)`` steps (single steps are too noisy to compare); with fewer than two
steps they, and anything else that cannot be computed, are null. A step's reward is the mean
over every training trial drawn for it. ``reward_trained_*`` / ``gain_trained`` take the batch
the step trained on instead (the step event's ``reward_mean``): a filter that drops groups
whose rewards are all equal keeps only mixed groups, whose means lie between 1/n and 1 - 1/n,
so that figure stays near the middle however well the policy does.

Time split per step: the step's wall time is ``step_seconds``; training is
``step_seconds - rollout_seconds``, and the rollout wall time is shared out in proportion to
the trial-seconds its trials spent generating (model calls), in the harness and sandbox
(agent phase minus its model calls, plus sandbox start/stop and anti-cheat) and verifying.
``per_trial`` keeps the unshared means per trial, and each phase's mean.

Terminations are counted for training and each held-out evaluation, and ``attribution`` names
whose each one met is (policy, infrastructure or none; the table in report.md is the one of
``docs/terminations.md``, cut to what the run met). ``reward_hacking`` counts the training
trials the ``reward-hacking`` anti-cheat policy flagged (``watched``: whether the spec ran it),
how many of the rewarded ones, trials per pattern, and per step from the store.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, TypeGuard

from lego_rl.data import Attribution, Termination, attribute
from lego_rl.observe.behaviour import step_behaviour, tool_calls, trial_behaviour
from lego_rl.observe.metric_groups import metric_keys
from lego_rl.observe.reader import RunReader, is_run_dir
from lego_rl.observe.store import EVAL_GROUP_PREFIX
from lego_rl.observe.terminations import table as termination_table

REPORT_DIR = "report"
WINDOW = 10
HACKING_POLICY = "reward-hacking"
PARTS = ("generation_s", "harness_sandbox_s", "verifier_s")
SPLIT = (*PARTS, "training_s")
"""The time split's parts, in the order they are shown."""
HELDOUT_FIELDS = (
    "success", "samples", "scored", "infrastructure_failures", "policy_version", "seconds",
    "per_task", "constant_baseline", "blind_baseline",
)  # fmt: skip
HEADLINE = (
    "reward_first10", "reward_last10", "gain", "reward_trained_first10", "reward_trained_last10",
    "gain_trained", "heldout_before", "heldout_after",
    "heldout_gain", "verified_after_edit_gain", "tests_after_change_gain", "informative_share",
    "minutes", "steps",
)  # fmt: skip
BEHAVIOUR_GAINS = ("verified_after_edit", "tests_after_change")
"""Held-out behaviour measures whose change over training the report states (``*_gain``)."""


def is_evaluation(trial: dict[str, Any]) -> bool:
    """A held-out evaluation trial (never part of a training step)."""
    return str(trial.get("group") or "").startswith(EVAL_GROUP_PREFIX)


def moving_mean(values: list[float | None], window: int = WINDOW) -> list[float | None]:
    """Trailing mean over the last ``window`` known values at each position."""
    out: list[float | None] = []
    for i in range(len(values)):
        seen = [v for v in values[max(0, i + 1 - window) : i + 1] if _finite(v)]
        out.append(sum(seen) / len(seen) if seen else None)
    return out


def reward_windows(rewards: list[float]) -> tuple[float | None, float | None, int]:
    """Means of the first and last ``min(10, n // 2)`` rewards, and that window size."""
    k = min(WINDOW, len(rewards) // 2)
    if k == 0:
        return None, None, 0
    return sum(rewards[:k]) / k, sum(rewards[-k:]) / k, k


def build_report(run_dir: Path) -> dict[str, Any]:
    """The report's figures (what report.json holds)."""
    run_dir = Path(run_dir)
    if not is_run_dir(run_dir):
        raise FileNotFoundError(f"{run_dir} has no run store (store.sqlite): not a run directory")
    reader = RunReader(run_dir)
    info = reader.info()
    steps = reader.steps()
    trials = [t for t in reader.trials() if not is_evaluation(t)]
    trained = [_number(s.get("reward_mean")) for s in steps]
    trained_first, trained_last, _ = reward_windows([r for r in trained if r is not None])
    drawn = drawn_rewards(steps, trials)
    first, last, window = reward_windows([r for r in drawn if r is not None])
    evaluations = {e["label"]: e for _, e in reader.events("evaluation") if "label" in e}
    before, after = evaluations.get("before", {}), evaluations.get("after", {})
    heldout_before, heldout_after = _number(before.get("success")), _number(after.get("success"))
    groups = sum(s.get("groups") or 0 for s in steps)
    split = time_split(steps, trials, reader.calls())
    ended = info["ended"] or max((x["time"] for x in steps + trials), default=None)
    terminations = {
        "training": dict(Counter(str(t.get("termination")) for t in trials)),
        **{f"heldout_{label}": e.get("terminations", {}) for label, e in evaluations.items()},
    }
    return {
        "run_dir": str(run_dir),
        "name": info["name"],
        "status": info["status"],
        "steps": len(steps),
        "minutes": (ended - info["started"]) / 60 if ended and info["started"] else None,
        "window": window,
        "reward_first10": first,
        "reward_last10": last,
        "gain": _diff(last, first),
        "reward_trained_first10": trained_first,
        "reward_trained_last10": trained_last,
        "gain_trained": _diff(trained_last, trained_first),
        "heldout_before": heldout_before,
        "heldout_after": heldout_after,
        "heldout_gain": _diff(heldout_after, heldout_before),
        "heldout_baseline": _number(after.get("constant_baseline", before.get("constant_baseline"))),
        "heldout_blind_baseline": (blind := _number(after.get("blind_baseline", before.get("blind_baseline")))),
        "heldout_over_blind": _diff(heldout_after, blind),
        **{
            f"{key}_gain": _diff(
                _number((after.get("behaviour") or {}).get(key)), _number((before.get("behaviour") or {}).get(key))
            )
            for key in BEHAVIOUR_GAINS
        },
        "informative_share": (
            sum(s.get("informative_groups") or 0 for s in steps) / groups if groups else None
        ),
        "curve": {
            "step": [int(s.get("step", i)) for i, s in enumerate(steps)],
            "reward_mean": drawn,
            "reward_trained": trained,
            "moving_mean": moving_mean(drawn),
            "informative_share": [
                (s.get("informative_groups") or 0) / s["groups"] if s.get("groups") else None
                for s in steps
            ],
            **behaviour_curve(steps, trials, str(info.get("harness") or "")),
        },
        "heldout": {
            label: {k: e.get(k) for k in HELDOUT_FIELDS} for label, e in evaluations.items()
        },
        "behaviour": {label: e.get("behaviour") for label, e in evaluations.items()},
        "terminations": terminations,
        "attribution": attributions(terminations),
        "reward_hacking": reward_hacking(trials, reader.reward_hacking(), _watched(info["spec"])),
        "consistency": consistency(steps),
        "token_boundary": token_boundary(trials),
        "time_split": split,
    }


def token_boundary(trials: list[dict[str, Any]]) -> dict[str, float]:
    """Over the training trials: calls whose re-rendered history drifted from what was sampled
    at a turn boundary (:mod:`lego_rl.proxy.boundary`), the context tokens they did not
    reproduce, trials refused for training tokens that were not sampled (infrastructure), and
    the non-sampled tokens of the trials that were trainable (0 by construction)."""

    def total(trial: dict[str, Any], key: str) -> float:
        return sum((f or {}).get(key, 0.0) for f in trial.get("fidelity") or [])

    kept = [t for t in trials if t.get("attribution") != Attribution.INFRASTRUCTURE.value]
    return {
        "drift_calls": sum(total(t, "boundary_drifts") for t in trials),
        "drift_trials": sum(1 for t in trials if total(t, "boundary_drifts")),
        "drift_tokens": sum(total(t, "boundary_drift_tokens") for t in trials),
        "drift_sampled_tokens": sum(total(t, "boundary_drift_sampled") for t in trials),
        "refused_trials": sum(1 for t in trials if total(t, "trained_non_sampled")),
        "trained_non_sampled_tokens": sum(total(t, "trained_non_sampled") for t in kept),
    }


def attributions(terminations: dict[str, dict[str, int]]) -> dict[str, str]:
    """The attribution of every termination the run met ('?' for one this version lacks)."""
    seen = sorted({name for counts in terminations.values() for name in counts})
    return {n: attribute(Termination(n)).value if n in Termination else "?" for n in seen}


def reward_hacking(
    trials: list[dict[str, Any]], per_step: dict[int, dict[str, Any]], watched: bool
) -> dict[str, Any]:
    """Training trials the ``reward-hacking`` policy flagged: how many, how many of the rewarded
    ones, which patterns (trials per pattern), where the verifier saw forgery, and per step
    (the store's counts)."""
    records = [(t, (t.get("verifier") or {}).get("reward_hacking")) for t in trials]
    flagged = [(t, r) for t, r in records if r]
    rewarded = sum(1 for t in trials if (_number(t.get("reward")) or 0.0) > 0)
    rewarded_flagged = sum(1 for t, _ in flagged if (_number(t.get("reward")) or 0.0) > 0)
    patterns = Counter(p for _, r in flagged for p in {f["pattern"] for f in r.get("flags") or []})
    return {
        "watched": watched,
        "flagged": len(flagged),
        "trials": len(trials),
        "rewarded": rewarded,
        "rewarded_flagged": rewarded_flagged,
        "rewarded_share": rewarded_flagged / rewarded if rewarded else None,
        "with_evidence": sum(1 for _, r in flagged if r.get("evidence")),
        "blocked": sum(1 for _, r in flagged if r.get("blocked")),
        "patterns": dict(patterns.most_common()),
        "per_step": [{"step": n, **row} for n, row in sorted(per_step.items())],
    }


def _watched(spec: dict[str, Any]) -> bool:
    """Whether the run's spec lists the reward-hacking policy."""
    blocks = spec.get("anticheat") or []
    return any(isinstance(b, dict) and b.get("plugin") == HACKING_POLICY for b in blocks)


def drawn_rewards(steps: list[dict[str, Any]], trials: list[dict[str, Any]]) -> list[float | None]:
    """Per step, the mean reward of every training trial drawn for it (None when none was)."""
    drawn: dict[int, list[float]] = defaultdict(list)
    for t in trials:
        if t.get("step") is not None and (reward := _number(t.get("reward"))) is not None:
            drawn[int(t["step"])].append(reward)
    numbers = [int(s.get("step", i)) for i, s in enumerate(steps)]
    return [sum(drawn[n]) / len(drawn[n]) if drawn[n] else None for n in numbers]


def behaviour_curve(
    steps: list[dict[str, Any]], trials: list[dict[str, Any]], harness: str
) -> dict[str, list[float | None]]:
    """Per step, the :data:`BEHAVIOUR_GAINS` measures of every training trial drawn for it
    (from the tool calls the harness listed, else its transcript)."""
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for t in trials:
        if t.get("step") is not None:
            by_step[int(t["step"])].append(trial_behaviour(tool_calls(t, (), harness), harness, _number(t.get("reward"))))
    rows = [step_behaviour(by_step[int(s.get("step", i))]) for i, s in enumerate(steps)]
    return {key: [row.get(key) for row in rows] for key in BEHAVIOUR_GAINS}


def consistency(steps: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Mean, first and last of every consistency metric the step events carry."""
    out: dict[str, dict[str, float | None]] = {}
    for keys in metric_keys(steps)["consistency"].values():
        for key in keys:
            values = [v for v in (_number(s.get(key)) for s in steps) if v is not None]
            out[key] = {
                "mean": sum(values) / len(values) if values else None,
                "first": values[0] if values else None,
                "last": values[-1] if values else None,
            }
    return out


def time_split(
    steps: list[dict[str, Any]], trials: list[dict[str, Any]], calls: list[dict[str, Any]]
) -> dict[str, Any]:
    """Seconds per step in generation, harness+sandbox, verifier and training (see module)."""
    model: dict[str, float] = defaultdict(float)
    for call in calls:
        model[call["session"]] += call.get("seconds") or 0.0
    per_trial = [_trial_parts(t, model.get(t["trial_id"], 0.0)) for t in trials]
    by_step: dict[int, list[dict[str, float]]] = defaultdict(list)
    for t, parts in zip(trials, per_trial, strict=True):
        by_step[int(t.get("step") or 0)].append(parts)
    rows = [_step_split(s, by_step.get(int(s.get("step", 0)), [])) for s in steps]
    phases: dict[str, list[float]] = defaultdict(list)
    for t in trials:
        for timing in t.get("timings") or []:
            phases[timing["phase"]].append(timing["seconds"])
    return {
        "mean": {k: _mean([r[k] for r in rows]) for k in SPLIT},
        "per_step": rows,
        "per_trial": {
            **{k: _mean([p[k] for p in per_trial]) for k in PARTS},
            "phases": {phase: _mean(v) for phase, v in phases.items()},
        },
    }


def _trial_parts(trial: dict[str, Any], model_seconds: float) -> dict[str, float]:
    phases: dict[str, float] = defaultdict(float)
    for timing in trial.get("timings") or []:
        phases[timing["phase"]] += timing["seconds"]
    verify = phases.pop("verify", 0.0)
    agent = phases.pop("agent", 0.0)
    return {
        "generation_s": model_seconds,
        "harness_sandbox_s": max(0.0, agent - model_seconds) + sum(phases.values()),
        "verifier_s": verify,
    }


def _step_split(step: dict[str, Any], parts: list[dict[str, float]]) -> dict[str, Any]:
    total, rollout = _number(step.get("step_seconds")), _number(step.get("rollout_seconds"))
    sums = {k: sum(p[k] for p in parts) for k in PARTS}
    busy = sum(sums.values())
    row: dict[str, Any] = {"step": int(step.get("step", 0)), "trials": len(parts)}
    for key, seconds in sums.items():
        row[key] = rollout * seconds / busy if rollout is not None and busy > 0 else None
    row["training_s"] = total - rollout if total is not None and rollout is not None else None
    return row


def write_report(run_dir: Path) -> Path:
    """Write ``run_dir/report/`` (report.json, report.md, reward_curve.png); returns the
    report.json path."""
    report = build_report(run_dir)
    out = Path(run_dir) / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    from lego_rl.observe.report_plot import plot_report

    plot_report(report, out / "reward_curve.png")
    (out / "report.md").write_text(markdown(report))
    path = out / "report.json"
    partial = path.with_suffix(".json.partial")  # replaced at once: a dashboard never reads half
    partial.write_text(json.dumps(_clean(report), indent=2, sort_keys=True, allow_nan=False))
    partial.replace(path)
    return path


def read_report(run_dir: Path) -> dict[str, Any] | None:
    """A run's report.json (None when the run has none yet)."""
    path = Path(run_dir) / REPORT_DIR / "report.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}): rerun `legorl report`") from None


def markdown(report: dict[str, Any]) -> str:
    """A short human summary of the report."""
    r = report
    split = split_text(r["time_split"]["mean"])
    lines = [
        f"# Run report: {r['name']} ({r['status']}, {r['steps']} steps, {fmt(r['minutes'])} min)",
        "",
        "![reward curve](reward_curve.png)",
        "",
        "| | first | last | gain |",
        "|---|---|---|---|",
        _row(f"train reward (mean of {r['window']} steps, every trial drawn)", r["reward_first10"],
             r["reward_last10"], r["gain"]),
        _row("train reward of the batches trained on (mixed groups only)",
             r.get("reward_trained_first10"), r.get("reward_trained_last10"), r.get("gain_trained")),
        _row("held-out success (before, after)", r["heldout_before"], r["heldout_after"],
             r["heldout_gain"]),
        "",
        *_baseline_line(r.get("heldout_baseline"), r.get("heldout_blind_baseline")),
        f"Informative groups (mixed rewards): {fmt(r['informative_share'])} of all groups.",
        "",
        f"Time per step (s): {split}.",
    ]  # fmt: skip
    if r["consistency"]:
        lines += ["", "| consistency | mean | first | last |", "|---|---|---|---|"]
        lines += [_row(k, v["mean"], v["first"], v["last"]) for k, v in r["consistency"].items()]
    labels = [label for label in ("before", "after") if r["behaviour"].get(label)]
    if labels:
        lines += ["", _row("held-out behaviour", *labels), "|---|" + "---|" * len(labels)]
        keys = [k for k in r["behaviour"][labels[0]] if k != "trials"]
        lines += [_row(k, *(r["behaviour"][x].get(k) for x in labels)) for k in keys]
    counts = [
        f"{where}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
        for where, c in r["terminations"].items()
        if c
    ]
    lines += ["", "Terminations: " + ("; ".join(counts) or "none") + "."]
    if (b := r.get("token_boundary")) is not None:
        lines += [
            "",
            f"Token boundaries: {fmt(b['trained_non_sampled_tokens'])} trained tokens not sampled; "
            f"{fmt(b['drift_calls'])} calls in {fmt(b['drift_trials'])} trials re-rendered their "
            f"history differently at a turn boundary ({fmt(b['drift_tokens'])} context tokens not "
            f"reproduced, new segments); {fmt(b['refused_trials'])} trials refused for training "
            "non-sampled tokens.",
        ]
    if r.get("attribution"):
        lines += ["", *termination_table(r["attribution"], r["terminations"])]
    lines += ["", *hacking_lines(r.get("reward_hacking"))]
    return "\n".join(lines) + "\n"


def hacking_lines(h: dict[str, Any] | None) -> list[str]:
    """The report's reward-hacking section."""
    if h is None:
        return []
    lines = ["## Reward hacking", ""]
    if not h["watched"] and not h["flagged"]:
        return lines + [f"Not watched: the run's anti-cheat list has no `{HACKING_POLICY}` policy."]
    flagged = [s for s in h["per_step"] if s["reward_hacking_flags"]]
    steps = ", ".join(f"{s['step']} ({s['reward_hacking_flags']})" for s in flagged)
    lines.append(
        f"Flagged: {h['flagged']} of {h['trials']} training trials; {h['rewarded_flagged']} of "
        f"{h['rewarded']} rewarded trials ({fmt(h['rewarded_share'])})"
        + (f"; {h['blocked']} blocked" if h["blocked"] else "")
        + (f"; by step: {steps}" if steps else "")
        + "."
    )
    if h["patterns"]:
        patterns = ", ".join(f"{k} {v}" for k, v in h["patterns"].items())
        lines += ["", f"Patterns (trials): {patterns}."]
    if h["with_evidence"]:
        lines += [""]
        lines.append(
            f"The verifier's evidence (forged report lines, a reward file the report contradicts, "
            f"surviving processes) came with {h['with_evidence']} of them."
        )
    return lines


def _baseline_line(constant: float | None, blind: float | None) -> list[str]:
    """The held-out baselines, when the evaluation knew them: the constant answer, and the best
    fixed policy that edits without testing where it scores more."""
    if constant is None:
        return []
    line = f"Always sending the most common held-out fix would score {fmt(constant)}."
    if blind is not None and blind > constant:
        line += f" The best fixed policy that edits without testing (the candidate at one place in the list, or the fix most often offered with the same candidates) would score {fmt(blind)}."
    return [line, ""]


def split_text(mean: dict[str, float | None]) -> str:
    """'generation 1.2, harness_sandbox 3.4, ...' (seconds per step)."""
    return ", ".join(f"{k[:-2]} {fmt(mean.get(k))}" for k in SPLIT)


def _row(*cells: Any) -> str:
    return "| " + " | ".join(c if isinstance(c, str) else fmt(c) for c in cells) + " |"


def fmt(value: Any) -> str:
    """A number for people: 3 significant digits, '–' when unknown."""
    if value is None:
        return "–"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _number(value: Any) -> float | None:
    return float(value) if _finite(value) else None


def _finite(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _diff(a: float | None, b: float | None) -> float | None:
    return a - b if a is not None and b is not None else None


def _mean(values: list[Any]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become null."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
