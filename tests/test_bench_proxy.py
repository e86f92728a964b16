"""``legorl bench proxy`` on a tiny load: every figure is there, computed from paired calls.

A smoke test of the figures' shape, not of the proxy's speed: nothing here is a latency or a
rate a loaded machine could miss (``targets_met`` is reported, not asserted). What is asserted
holds by construction: call counts, request sizes, orderings of percentiles.
"""

import pytest

from lego_rl.bench import proxy
from lego_rl.bench.proxy_traffic import TRAFFIC

SESSIONS, TURNS, THROUGHPUT_SESSIONS = 3, 3, 1
TIMINGS = [
    "p50_overhead_ms", "p99_overhead_ms", "max_overhead_ms", "p50_overhead_vs_call_ms",
    "p99_overhead_vs_call_ms", "direct_p50_http_ms", "direct_p99_http_ms", "direct_drift_p50_ms",
    "calls_per_s", "calls_per_s_per_core", "tokenize_turn1_ms", "tokenize_turn2_ms",
    "tokenize_turn4_ms", "tokenize_turn100_over_turn1", "tokenize_turn100_over_turn2",
    "render_turn1_ms", "render_turn4_ms", "render_tokenize_turn100_over_turn1",
]  # fmt: skip
"""Figures that are measured times (or their ratios): their type is checked, never their size."""


@pytest.mark.parametrize("dialect", sorted(TRAFFIC))
def test_bench_pairs_each_proxied_call_with_the_same_call_direct(dialect):
    figures = proxy.main(
        [
            "--sessions", str(SESSIONS), "--turns", str(TURNS), "--gen-ms", "5", "--pause-ms", "5",
            "--paced-s", "3600",  # a cap that never binds here: every paced call is made
            "--throughput-s", "0.2", "--throughput-sessions", str(THROUGHPUT_SESSIONS),
            "--tokenize-turns", "4", "--tokenizer", "tiny", "--dialect", dialect,
        ]
    )  # fmt: skip
    assert (figures["dialect"], figures["tokenizer"]) == (dialect, "tiny")
    calls = SESSIONS * TURNS
    assert figures["paced_calls"] == figures["paired_calls"] == calls
    assert figures["extends_share"] == (calls - SESSIONS) / calls  # a session's first is fresh
    assert 70 < figures["first_body_kb"] < figures["mean_body_kb"] < 80  # the same content
    assert figures["turn4_body_kb"] > figures["first_body_kb"]  # each turn adds to the history
    for name in TIMINGS:
        assert isinstance(figures[name], float), name
    assert figures["p50_overhead_ms"] <= figures["p99_overhead_ms"] <= figures["max_overhead_ms"]
    assert figures["direct_p50_http_ms"] <= figures["direct_p99_http_ms"]
    # Each session finishes its first conversation however slow the machine (the window
    # opens when the sessions start): the throughput run has calls, so a rate.
    assert figures["throughput_calls"] >= THROUGHPUT_SESSIONS * 4 * TURNS
    assert figures["calls_per_s"] > 0 and figures["calls_per_s_per_core"] > 0
    assert figures["renders"]["mismatches"] == 0
    assert figures["renders"]["full"] + figures["renders"]["incremental"] >= calls
    assert figures["chunk_cache"]["mismatches"] == figures["tokenizer_twin"]["mismatches"] == 0
    hits, misses = figures["prefix_cache_hits_misses"]
    assert hits + misses > 0
    held = figures["cache_bytes"]
    arrays = held[f"{dialect}.messages.arrays"]
    assert arrays > 0 and held["tokenizer.chunks"] > 0 and held["tokenizer.prefixes"] > 0
    assert figures["cache_bytes_total"] == sum(held.values())
    after = figures["cache_bytes_after_close"]  # this process's caches: other tests' too
    assert after[f"{dialect}.messages.arrays"] < arrays  # the sessions' arrays went with them
    assert figures["cache_bytes_after_close_total"] == sum(after.values())
    for run in ("paced_gc", "throughput_gc"):
        assert set(figures[run]) == {
            "gc_collections", "gc_full_collections", "gc_max_pause_ms", "gc_total_pause_ms",
        }  # fmt: skip
    assert set(figures["targets_met"]) == {
        "p50_overhead_ms<2", "p99_overhead_ms<10", "calls_per_s_per_core>=500",
        "tokenize_turn100_over_turn1<2",
    }  # fmt: skip
    assert all(isinstance(met, bool) for met in figures["targets_met"].values())
