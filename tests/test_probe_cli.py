"""`legorl probe SPEC` end to end: k attempts per task through the real sandbox, harness and
verifier, per-task pass rates stored, reused by a rerun, and read by the pass-rate filter.

The scripted harness applies the fix of one task (fix-square) and nothing else, so its pass
rate is 1 and every other task's is 0.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lego_rl.kinds import Task
from lego_rl.registry import BuildContext, default_registry
from lego_rl.spec.resolve import load_and_resolve

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "mini-swe-agent-local.yaml"
LEGORL = str(Path(sys.executable).parent / "legorl")
FIX_SQUARE = "sed -i 's/power(2, x)/power(x, 2)/' powers.py"
TWO = '["fix-square","fix-average"]'
AVERAGE_FAILS = ("fix-average", "completed", "0")
SQUARE_PASSES = ("fix-square", "completed", "1")
TRIAL_LINE = re.compile(r"^\s+(fix-[\w-]+): (\w+) reward=(\S+)$", re.M)


def overrides(out: Path) -> list[str]:
    return [
        f"run.output_dir={out}",
        f"tasks.options.include={TWO}",
        "harness.plugin=scripted",
        f"harness.options.commands={json.dumps([FIX_SQUARE])}",
        "filter.plugin=pass-rate",
        "filter.options.probes=2",  # k
        "filter.options.min_passes=0",  # the band: tasks no attempt solved
        "filter.options.max_passes=0",
    ]


def probe(out: Path) -> list[tuple[str, str, str]]:
    """Run `legorl probe`; the trials it ran as (task, termination, reward)."""
    proc = subprocess.run(
        [LEGORL, "probe", str(SPEC), *overrides(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "pass rates of 2 tasks" in proc.stdout, proc.stdout
    return TRIAL_LINE.findall(proc.stdout)


def rates(out: Path) -> dict[str, object]:
    return json.loads((out / "pass_rates.json").read_text())


@pytest.mark.slow
def test_probe_stores_rates_reruns_reuse_them_and_the_filter_reads_them(tmp_path: Path) -> None:
    out = tmp_path / "out"
    ran = probe(out)
    assert sorted(ran) == [AVERAGE_FAILS] * 2 + [SQUARE_PASSES] * 2
    policy = "tiny-qwen3-moe@config"
    assert rates(out) == {"policy": policy, "tasks": {"fix-average": [2, 0], "fix-square": [2, 2]}}

    # one task short of k attempts (as after a probe with fewer): a rerun probes only that
    # one, with k fresh attempts (same trial ids as before, so in a fresh directory)
    stored = rates(out)
    stored["tasks"]["fix-average"] = [1, 0]
    (out / "pass_rates.json").write_text(json.dumps(stored))
    assert sorted(probe(out)) == [AVERAGE_FAILS] * 2
    assert rates(out)["tasks"] == {"fix-average": [2, 0], "fix-square": [2, 2]}
    assert sorted(p.name for p in (out / "pass_rates-trials").iterdir()) == ["probe", "probe-2"]

    # `legorl apply` with this spec keeps the tasks in the band: the filter reads the file
    resolved = load_and_resolve(SPEC, default_registry(), overrides(out))
    block = resolved.block("filter")
    ctx = BuildContext(spec=resolved.spec, spec_dir=SPEC.parent)
    filter_ = default_registry().build(block.kind, block.block.plugin, block.options, ctx)
    assert filter_.preflight() == []
    names = ("fix-square", "fix-average", "unprobed")
    kept = filter_.select_tasks([Task(name=n, path=tmp_path, instruction="") for n in names])
    assert [t.name for t in kept] == ["fix-average", "unprobed"]
