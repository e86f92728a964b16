"""The record of limits a trial ran into, shared by every sandbox backend: one entry per limit
and phase, and cgroup counters counted by their growth per container."""

from __future__ import annotations

import signal

from legorl_std.sandbox.limits import LimitLog, Limits, limit_label


def test_a_limit_is_recorded_once_per_phase_with_its_first_detail() -> None:
    log = LimitLog()
    log.record("agent", [("memory_mb=64", "1 OOM kill")])
    log.record("agent", [("memory_mb=64", "3 OOM kills"), ("nproc=32", "1 fork refused")])
    log.record("verify", [("memory_mb=64", "1 OOM kill")])
    assert log.events() == [
        {"phase": "agent", "limit": "memory_mb=64", "detail": "1 OOM kill"},
        {"phase": "agent", "limit": "nproc=32", "detail": "1 fork refused"},
        {"phase": "verify", "limit": "memory_mb=64", "detail": "1 OOM kill"},
    ]


def test_counters_count_their_growth_per_scope() -> None:
    log, values = LimitLog(), {"memory_mb": 64.0, "nproc": None}
    assert log.counted({"memory_mb": 1, "nproc": 0}, values, scope="a") == [("memory_mb=64", "1 OOM kill")]
    assert log.counted({"memory_mb": 1, "nproc": 0}, values, scope="a") == [], "no growth, nothing new"
    assert log.counted({"memory_mb": 4, "nproc": 2}, values, scope="a") == [
        ("memory_mb=64", "3 OOM kills"),
        ("nproc", "2 forks refused"),
    ]
    assert log.counted({"memory_mb": 1}, values, scope="b") == [("memory_mb=64", "1 OOM kill")], "a fresh container"


def test_an_rlimits_signal_names_the_limit() -> None:
    limits = Limits(cpu_seconds=60, file_size_mb=8)
    assert LimitLog.signalled(limits, 128 + signal.SIGXCPU) == [
        ("cpu_seconds=60", f"a command was killed by signal {signal.SIGXCPU}")
    ]
    assert LimitLog.signalled(limits, 128 + signal.SIGXFSZ)[0][0] == "file_size_mb=8"
    assert LimitLog.signalled(limits, 1) == LimitLog.signalled(limits, None) == LimitLog.signalled(None, 152) == []
    assert limit_label("storage_mb", 512) == "storage_mb=512" and limit_label("storage_mb", None) == "storage_mb"
