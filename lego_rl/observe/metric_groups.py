"""Which step metrics go together: the dashboard's charts and the report's consistency table.

Step metrics come from whichever trainer wrote them, so names are matched by pattern
(``METRIC_GROUPS``), never listed: each chart plots every numeric key that matches.
"""

from __future__ import annotations

import re
from typing import Any

METRIC_GROUPS: dict[str, dict[str, str]] = {
    "consistency": {
        "prob_pearson": r"pearson",
        "k3": r"(^|_)k3(_|$)",
        "logp_diff_abs": r"logp_diff",
        "routing_agreement": r"routing.*agree|agree.*routing",
        "correction": r"^rollout_(ess|masked_fraction)$|^tis_(capped_fraction|weight_mean)$",
        "token_boundary": r"^boundary_drift|non_sampled",
    },
    "scheduling": {
        "trainer_wait": r"wait_fraction|busy_fraction|busy_share",
        "staleness": r"stale|version_lag",
    },
    "proxy": {
        "cache_bytes": r"^proxy_cache_.*bytes$",
    },
}
"""Chart -> regular expression over step metric names; every numeric match is a series."""


def metric_keys(steps: list[dict[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """Group -> chart -> the numeric step keys (sorted) that match the chart's pattern."""
    numeric = sorted(
        {
            k
            for s in steps
            for k, v in s.items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
    )
    return {
        group: {
            chart: [k for k in numeric if re.search(pattern, k)]
            for chart, pattern in charts.items()
        }
        for group, charts in METRIC_GROUPS.items()
    }
