"""The report's figure: reward per step with its moving mean, the behaviour measures per step
(verification after the last edit, tests after a change) and the held-out success before
and after training (top), and where each step's wall time went (bottom).

The x axis is the policy version that sampled: step n's rollouts come from version n, the
held-out ``before`` evaluation from version 0 and ``after`` from the final version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

PART_COLORS = {
    "generation_s": ("generation", "#3867d6"),
    "harness_sandbox_s": ("harness + sandbox", "#fdcb6e"),
    "verifier_s": ("verifier", "#00b894"),
    "training_s": ("training", "#e17055"),
}


def plot_report(report: dict[str, Any], path: Path) -> Path:
    """Draw the report's curves into a PNG at ``path``."""
    curve = report["curve"]
    fig = Figure(figsize=(8, 6))  # the Agg canvas, no pyplot: no display, no global state
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    _rewards(top, curve, report)
    _time_split(bottom, report["time_split"]["per_step"])
    fig.suptitle(f"{report['name']}: {report['steps']} steps, {_minutes(report)}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _rewards(ax: Any, curve: dict[str, list[Any]], report: dict[str, Any]) -> None:
    steps = curve["step"]
    ax.plot(steps, _nan(curve["reward_mean"]), "o-", color="#95a0b4", ms=3, lw=1,
            label="reward per step (every trial drawn)")  # fmt: skip
    ax.plot(steps, _nan(curve["moving_mean"]), "-", color="#3867d6", lw=2.2,
            label="10-step moving mean")  # fmt: skip
    if curve.get("reward_trained"):
        ax.plot(steps, _nan(curve["reward_trained"]), "x:", color="#e17055", ms=3, lw=1,
                label="reward of the batch trained on")  # fmt: skip
    for key, label, color in (
        ("verified_after_edit", "verified after the last edit (share of editing trials)", "#6c5ce7"),
        ("tests_after_change", "tests run after a change", "#00cec9"),
    ):
        if any(v is not None for v in curve.get(key) or []):
            ax.plot(steps, _nan(curve[key]), "--", color=color, lw=1.2, label=label)
    for label, marker, color in (("before", "s", "#d63031"), ("after", "D", "#00b894")):
        held = report["heldout"].get(label) or {}
        if held.get("success") is None:
            continue
        x = held.get("policy_version")
        x = x if x is not None else (steps[0] if label == "before" or not steps else steps[-1] + 1)
        ax.plot([x], [held["success"]], marker, color=color, ms=9,
                label=f"held-out {label}: {held['success']:.2f}")  # fmt: skip
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel("reward / success")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    if not steps:
        ax.text(0.5, 0.5, "no step finished", transform=ax.transAxes, ha="center")


def _time_split(ax: Any, rows: list[dict[str, Any]]) -> None:
    x = [r["step"] for r in rows]
    bottom = [0.0] * len(rows)
    for key, (label, color) in PART_COLORS.items():
        values = [r.get(key) or 0.0 for r in rows]
        if any(values):
            ax.bar(x, values, bottom=bottom, color=color, label=label, width=0.8)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_xlabel("step (policy version that sampled)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("seconds")
    ax.grid(alpha=0.3, axis="y")
    if any(bottom):
        ax.set_ylim(0, max(bottom) * 1.35)  # room for the legend above the bars
        ax.legend(loc="upper center", fontsize=8, ncol=4)


def _nan(values: list[Any]) -> list[float]:
    return [float("nan") if v is None else v for v in values]


def _minutes(report: dict[str, Any]) -> str:
    minutes = report.get("minutes")
    return f"{minutes:.1f} min" if minutes is not None else "duration unknown"
