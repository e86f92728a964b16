"""``legorl bench sandbox``: the figures' shape (never their speed)."""

from __future__ import annotations

import os
import shutil

import pytest
from legorl_std.sandbox.bench import main

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (overlays)"),
]


def test_the_bench_reports_start_pristine_verification_and_verifier_figures() -> None:
    figures = main(["--trials", "2", "--verify", "1"])
    for files in (10, 10_000):
        for key in ("start", "stop", "seal", "pristine"):
            p50, p99 = figures[f"files_{files}_{key}_p50_ms"], figures[f"files_{files}_{key}_p99_ms"]
            assert isinstance(p50, float) and 0 < p50 <= p99, (files, key)
    assert figures["verifier_overhead_p50_ms"] > 0 and figures["trials"] == 2


@pytest.mark.slow
def test_another_backend_is_measured_beside_local() -> None:
    """Harbor (its bubblewrap environment here) and local in one run: whole trials of fix-add
    that must each reward 1, and the overhead the backend adds."""
    pytest.importorskip("legorl_harbor")
    figures = main(["--backend", "harbor", "--trials", "2"])
    assert figures["backend"] == "harbor" and figures["trials"] == 2
    for label in ("harbor", "local"):
        for key in ("ready", "stop", "trial"):
            p50, p99 = figures[f"{label}_{key}_p50_ms"], figures[f"{label}_{key}_p99_ms"]
            assert 0 < p50 <= p99, (label, key)
    assert figures["trial_overhead_p50_ms"] == round(figures["harbor_trial_p50_ms"] - figures["local_trial_p50_ms"], 2)


def test_a_backend_the_registry_lacks_is_named() -> None:
    with pytest.raises(Exception, match="no-such-sandbox"):
        main(["--backend", "no-such-sandbox", "--trials", "1"])
