"""What the dashboard page plots: one run's store turned into per-step series and trial details.

Step metrics come from whichever trainer wrote them, so metric names are read defensively:
each chart lists the keys that match its pattern (:mod:`lego_rl.observe.metric_groups`) and
plots each one.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from lego_rl.data import Trajectory
from lego_rl.observe.behaviour import actions, step_behaviour, tool_calls, trial_behaviour
from lego_rl.observe.metric_groups import metric_keys
from lego_rl.observe.reader import RunReader
from lego_rl.observe.report import is_evaluation, moving_mean, read_report

TRIAL_FIELDS = (
    "trial_id",
    "step",
    "task",
    "group",
    "reward",
    "termination",
    "attribution",
    "reason",
    "calls",
    "time",
)


NO_HACKING = {"reward_hacking_flags": 0, "reward_hacking_rewarded": None}
"""A step none of whose trials the store holds yet."""


def find_option(tree: Any, name: str) -> Any:
    """The first value of key ``name`` anywhere in a nested spec (None when absent)."""
    if isinstance(tree, dict):
        if name in tree:
            return tree[name]
        for value in tree.values():
            found = find_option(value, name)
            if found is not None:
                return found
    return None


class RunView:
    """Builds the page's data for one run; caches per-trial analytics (trials never change)."""

    def __init__(self, reader: RunReader):
        self.reader = reader
        self._behaviour: dict[str, dict[str, Any]] = {}

    def data(self) -> dict[str, Any]:
        reader = self.reader
        version = reader.version()
        info = reader.info()
        info["routing_replay"] = find_option(info.pop("spec"), "routing_replay")
        steps, trials, calls = reader.steps(), reader.trials(), reader.calls()
        behaviour = self._behaviours(trials, info["harness"])
        step_of = {t["trial_id"]: t.get("step", 0) for t in trials}
        sampled: Counter[int] = Counter()
        for call in calls:
            if call["session"] in step_of:
                sampled[step_of[call["session"]]] += call["completion_tokens"] or 0
        by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for t in trials:
            if not is_evaluation(t):  # held-out trials belong to no training step
                by_step[int(t.get("step", 0))].append(t)
        metrics = {int(s.get("step", 0)): s for s in steps}
        hacking = reader.reward_hacking()
        rows = [
            self._row(n, metrics.get(n, {}), by_step.get(n, []), sampled[n], behaviour)
            | hacking.get(n, NO_HACKING)
            for n in sorted(set(metrics) | set(by_step))
        ]
        for row, mean10 in zip(rows, moving_mean([r["reward_mean"] for r in rows]), strict=True):
            row["reward_mean10"] = mean10
        return {
            "version": version,
            "info": info,
            "metric_keys": metric_keys(steps),
            "steps": rows,
            "evaluations": [{**e, "time": t} for t, e in reader.events("evaluation")],
            "report": self._report(),
            "trials": [
                {
                    **{k: t.get(k) for k in TRIAL_FIELDS},
                    "behaviour": behaviour.get(t["trial_id"]),
                    "reward_hacking": bool((t.get("verifier") or {}).get("reward_hacking")),
                }
                for t in trials
            ],
        }

    def _report(self) -> dict[str, Any] | None:
        """The run's report.json when written (a damaged one is shown as its error)."""
        try:
            return read_report(self.reader.run_dir)
        except ValueError as exc:
            return {"error": str(exc)}

    @staticmethod
    def _row(
        n: int,
        m: dict[str, Any],
        trials: list[dict[str, Any]],
        sampled_tokens: int,
        behaviour: dict[str, dict[str, Any]],
    ) -> dict[str, Any]:
        rewards = [float(t.get("reward", 0.0)) for t in trials]
        groups = m.get("groups")
        step_s, rollout_s = m.get("step_seconds"), m.get("rollout_seconds")
        row: dict[str, Any] = {k: v for k, v in m.items() if isinstance(v, int | float)}
        row.update(
            step=n,
            complete=bool(m),
            # every trial drawn for the step, as the report counts it; the trained batch's
            # (mixed groups only, when a filter drops uniform ones) beside it
            reward_mean=sum(rewards) / len(rewards) if rewards else m.get("reward_mean"),
            reward_trained=m.get("reward_mean"),
            rewards=rewards,
            informative_share=(m.get("informative_groups", 0) / groups) if groups else None,
            terminations=dict(Counter(str(t.get("termination")) for t in trials)),
            attribution=dict(Counter(str(t.get("attribution")) for t in trials)),
            trials_per_min=(len(trials) * 60.0 / step_s) if step_s else None,
            sampled_tokens_per_s=(sampled_tokens / rollout_s) if rollout_s else None,
            trained_tokens_per_s=(m.get("trained_tokens", 0) / step_s) if step_s else None,
            behaviour=step_behaviour(
                [behaviour[t["trial_id"]] for t in trials if t["trial_id"] in behaviour]
            ),
        )
        return row

    def _behaviours(self, trials: list[dict[str, Any]], harness: str) -> dict[str, dict[str, Any]]:
        missing = [t for t in trials if t["trial_id"] not in self._behaviour]
        if missing:
            from_proxy = self.reader.proxy_tool_calls()
            for t in missing:
                records = [{"tool_calls": from_proxy.get(t["trial_id"], [])}]
                self._behaviour[t["trial_id"]] = trial_behaviour(
                    tool_calls(t, records, harness), harness, t.get("reward")
                )
        return self._behaviour

    def trial(self, trial_id: str) -> dict[str, Any] | None:
        """One trial opened: result, calls, segments (rewrites marked), tool calls, transcript."""
        trial = self.reader.trial(trial_id)
        if trial is None:
            return None
        harness = self.reader.info()["harness"]
        records = self.reader.call_records(trial_id)
        calls = tool_calls(trial, records, harness)
        return {
            "result": trial,
            "calls": _call_summaries(records, self.reader.calls(trial_id)),
            "segments": _segments(self.reader.trajectory(trial_id)),
            "tool_calls": [
                {
                    "name": c.name,
                    "arguments": c.arguments,
                    "actions": [{"kind": a.kind, "files": a.files} for a in actions([c], harness)],
                }
                for c in calls
            ],
            "behaviour": trial_behaviour(calls, harness, trial.get("reward")),
        }


def _call_summaries(
    records: list[dict[str, Any]], rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Call records (their prompts left out) joined with the calls table's counts."""
    prompt = {r["idx"]: r["prompt_tokens"] for r in rows}
    return [{**_call_summary(r), "prompt_tokens": prompt.get(r.get("index"))} for r in records]


def _call_summary(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "index": record.get("index"),
        "completion_tokens": len(record.get("completion_ids") or []),
        "finish_reason": record.get("finish_reason"),
        "extends_previous": record.get("extends_previous"),
        "boundary": record.get("boundary"),
        "boundary_tokens": record.get("boundary_tokens", 0),
        "seconds": (record.get("ended_at") or 0.0) - (record.get("started_at") or 0.0),
        "error": record.get("error"),
        "policy_version": record.get("policy_version"),
        "subagent": record.get("subagent", False),
        "logprob_mean": _mean(record.get("logprobs") or []),
    }


def _segments(trajectory: Trajectory | None) -> dict[str, Any] | None:
    """Each segment's size and calls; every segment after the first began with a rewrite."""
    if trajectory is None:
        return None
    return {
        "rolled_back": trajectory.rolled_back,
        "segments": [
            {
                "index": i,
                "tokens": len(s.ids),
                "trained": s.trained_tokens,
                "calls": s.calls,
                "rewrite": i > 0,
            }
            for i, s in enumerate(trajectory.segments)
        ],
    }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
