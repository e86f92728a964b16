"""``legorl bench proxy`` on a tiny load: every figure is there, computed from paired calls."""

import pytest

from lego_rl.bench import proxy
from lego_rl.bench.proxy_traffic import TRAFFIC


@pytest.mark.parametrize("dialect", sorted(TRAFFIC))
def test_bench_pairs_each_proxied_call_with_the_same_call_direct(dialect):
    figures = proxy.main(
        [
            "--sessions", "3", "--turns", "3", "--gen-ms", "5", "--pause-ms", "5",
            "--paced-s", "20", "--throughput-s", "1", "--throughput-sessions", "1",
            "--tokenize-turns", "4", "--tokenizer", "tiny", "--dialect", dialect,
        ]
    )
    assert figures["dialect"] == dialect
    assert 70 < figures["first_body_kb"] < 80  # the same content in each dialect's shape
    assert figures["paced_calls"] == figures["paired_calls"] == 9
    assert figures["direct_p50_http_ms"] > 0
    # The proxy parses, renders and tokenizes ~75 KB requests (a session's first from scratch:
    # tens of ms). On a loaded machine the median of 9 paired differences may fall either side
    # of 0; the slowest cannot.
    assert figures["p50_overhead_ms"] <= figures["p99_overhead_ms"] <= figures["max_overhead_ms"]
    assert figures["max_overhead_ms"] > 0
    assert figures["extends_share"] == 6 / 9  # each session's first call starts fresh
    assert figures["throughput_calls"] > 0 and figures["calls_per_s_per_core"] > 0
    assert figures["renders"]["mismatches"] == 0
    assert set(figures["targets_met"]) == {
        "p50_overhead_ms<2", "p99_overhead_ms<10", "calls_per_s_per_core>=500",
        "tokenize_turn100_over_turn1<2",
    }
