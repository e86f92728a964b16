"""The byte budgets of the proxy's caches: sizes, eviction by bytes, tentative requests, scopes,
and the figures reported as step metrics."""

from __future__ import annotations

import sys

import pytest

from lego_rl.kinds import ChatMessage
from lego_rl.observe.metric_groups import metric_keys
from lego_rl.proxy.budgets import ByteLRU, cache_bytes, cache_metrics, size_of, tentative
from lego_rl.proxy.fast.shared_tools import SharedTools
from lego_rl.token_ids import TokenIds


def test_size_of_counts_what_an_entry_keeps_alive_once():
    body = b"x" * 100_000
    view = memoryview(body)[:10]
    assert size_of(view) >= 100_000  # a view keeps its whole buffer
    text = "y" * 5000
    assert size_of([text, text]) == sys.getsizeof([text, text]) + sys.getsizeof(text)
    message = ChatMessage("user", "z" * 3000, tool_calls=[{"id": "a" * 1000}])
    assert size_of(message) > 4000
    assert size_of(TokenIds(range(1000))) >= 4000


def test_entries_go_least_recently_used_first_past_the_budget_in_bytes():
    cache: ByteLRU[str, str] = ByteLRU("test.lru", budget=300)
    for key in "abc":
        cache.put(key, key, 100)
    assert cache.get("a") is not None  # now the most recent
    cache.put("d", "d", 100)
    assert list(cache.entries) == ["c", "a", "d"] and cache.nbytes == 300
    assert cache.put("huge", "x", 301) is None and "huge" not in cache


def test_a_failed_block_takes_back_what_it_put_and_restores_what_it_displaced():
    cache: ByteLRU[str, str] = ByteLRU("test.tentative", budget=1000)
    kept = cache.put("kept", "v", 10)
    assert kept is not None
    with pytest.raises(RuntimeError), tentative():
        cache.discard(kept)
        cache.put("new", "w", 20)
        assert list(cache.entries) == ["new"]
        raise RuntimeError("refused")
    assert list(cache.entries) == ["kept"] and cache.nbytes == 10 and kept.alive
    with tentative():
        cache.put("new", "w", 20)
    assert "new" in cache  # a block that succeeds keeps what it put


def test_a_scope_is_forgotten_with_its_session():
    cache: ByteLRU[tuple[str, int], int] = ByteLRU("test.scoped", budget=1000)
    for n in range(3):
        cache.put(("s1", n), n, 10, scope="s1")
    cache.put(("s2", 0), 0, 10, scope="s2")
    assert [e.value for e in cache.scoped("s1")] == [0, 1, 2]
    cache.forget("s1")
    assert list(cache.entries) == [("s2", 0)] and cache.nbytes == 10


def test_shared_tool_lists_stay_within_their_budget_and_a_failed_request_takes_its_back():
    tools = [[{"name": f"t{n}", "description": "d" * 2000}] for n in range(4)]
    shared = SharedTools(budget=2 * size_of(tools[0]))
    for listed in tools:
        assert shared.share(listed) is listed
    assert shared.nbytes <= shared.budget and [t for t, _ in shared.recent] == tools[:1:-1]
    with pytest.raises(RuntimeError), tentative():
        shared.share([{"name": "new"}])
        raise RuntimeError("refused")
    assert [t for t, _ in shared.recent] == tools[:1:-1]


def test_cache_sizes_are_step_metrics_the_dashboard_charts():
    cache: ByteLRU[str, str] = ByteLRU("test.Metric-Name", budget=1000)
    cache.put("k", "v", 123)
    assert cache_bytes()["test.Metric-Name"] == 123
    metrics = cache_metrics()
    assert metrics["proxy_cache_test_metric_name_bytes"] == 123.0
    assert metrics["proxy_cache_bytes"] >= 123.0
    assert metric_keys([metrics])["proxy"]["cache_bytes"] == sorted(metrics)
