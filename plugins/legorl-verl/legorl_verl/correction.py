"""The embedded objectives' rollout correction (``optimizer.options.correction`` /
``tis_cap``) as verl 0.9's ``algorithm.rollout_correction`` keys.

verl's k1 rejection statistic is ``log(pi_rollout / pi_train)`` while ours bounds
``pi_train / pi_rollout``: a band ``[low, high]`` becomes verl's ``1/high _ 1/low`` (a ``low`` of 0
has no finite inverse: verl needs one, so it is refused).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KEY = "algorithm.rollout_correction."


def rollout_correction(opts: Mapping[str, Any], default_level: str, errors: list[tuple[str, str]]) -> dict[str, Any]:
    """verl's keys for the optimizer options ``opts`` (``default_level``: the objective's own
    level for a plain ``tis_cap``: token for grpo/ppo, sequence for gspo)."""
    correction = opts.get("correction")
    if correction is None:
        tis = opts.get("tis_cap", 2.0)
        return {KEY + "rollout_is": None if tis is None else default_level,
                **({} if tis is None else {KEY + "rollout_is_threshold": float(tis)})}  # fmt: skip
    values: dict[str, Any] = {KEY + "rollout_is": correction.get("is_level", "token")}
    threshold = correction.get("is_threshold", 2.0)
    if values[KEY + "rollout_is"] is not None:
        values[KEY + "rollout_is_threshold"] = (
            f"{float(threshold[0])}_{float(threshold[1])}" if isinstance(threshold, list | tuple) else float(threshold)
        )
    rules = correction.get("reject") or []
    if rules:
        bands = []
        for i, rule in enumerate(rules):
            low, high = float(rule.get("low", 0.0)), float(rule["high"])
            if low <= 0:
                errors.append((f"optimizer.options.correction.reject[{i}].low",
                               "verl bounds log(pi_rollout / pi_train): a low of 0 has no finite inverse; set a positive low"))  # fmt: skip
                continue
            bands.append(f"{1.0 / high}_{1.0 / low}")
        values[KEY + "rollout_rs"] = ",".join(rule["mode"] for rule in rules)
        values[KEY + "rollout_rs_threshold"] = ",".join(bands)
    return values
