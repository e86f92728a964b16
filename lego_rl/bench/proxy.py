"""``legorl bench proxy``: what the proxy adds to each model call, with Claude-Code-sized traffic.

Requests are synthesised like Claude Code's (anthropic-messages, ~75 KB: a long system prompt
and 24 tools shared by every session, a growing history of tool calls and results), or with
``--dialect`` like Codex's (openai-responses) or a tool-calling agent's on Chat Completions, of
the same content (:mod:`lego_rl.bench.proxy_traffic`). The load runs in a separate process (as
harnesses do), so the proxy's process does only proxy work.

- ``p50/p99_overhead_ms``: sessions call at a harness's pace: ``gen_ms`` of generation, then a
  pause while the harness runs tools (``pause_ms`` on average, each within ``pause_jitter`` of
  it; sessions start in groups of 4), directly, then through the proxy, then directly again:
  the same backend behind a bare HTTP endpoint on the same server stack (uvicorn, Starlette, a
  worker thread per call) that reads the body and answers a fixed reply of the same shape,
  parsing, rendering, tokenizing, recording and formatting nothing. Overhead = a call's latency
  through the proxy minus the mean of the same call's (session, turn) latencies direct, before
  and after: what the proxy adds, the HTTP a harness pays to reach any backend left out, and a
  drift of the machine between runs cancelled to first order (``direct_drift_p50_ms``: how much
  the second direct run differed from the first). ``*_overhead_vs_call_ms`` keep the stricter
  figure against the backend called in process (HTTP and the machine's wake-ups included).
- ``calls_per_s_per_core``: closed loop against an instant backend for ``throughput_s`` (each
  session starts a new conversation after ``turns`` calls); calls per CPU-second of the
  proxy's process. The window opens when the load's sessions start (not when its process is
  spawned), and each session finishes its first conversation however long that takes, so a
  loaded machine slows the run but never leaves it without calls (``throughput_calls`` >=
  sessions x ``turns``).
- ``tokenize_turn100_over_turn1``: tokenizing turn 100 of one session over turn 1 (both with
  the shared system/tools prefix cached); ``render_tokenize_turn100_over_turn1`` adds the
  chat-template rendering (incremental: only the messages a turn adds are rendered). Turn 1
  also finds the first user message's shared pieces (the reminder) in the chunk cache, so it
  is cheaper than a later turn's delta; ``tokenize_turn100_over_turn2`` compares turn 100 with
  the first incremental turn (the same kind of work: one tool result).
- ``tokenizer_twin``: texts the tiktoken twin tokenized in the paced run, how many were checked
  against the tokenizer itself, and disagreements (a disagreement turns the twin off).
  ``template_twin``: the same for the chat template rendered in Python
  (:mod:`lego_rl.proxy.native_templates`; our "qwen3" template has one), null for a template
  rendered by Jinja alone.
- ``cache_bytes``: what each of the proxy's caches holds at the end of the paced run, by name,
  with the sessions still open (:func:`lego_rl.proxy.budgets.cache_bytes`: estimates that err
  high, each cache bounded by its byte budget); ``cache_bytes_total`` their sum;
  ``cache_bytes_after_close`` (by name) and ``cache_bytes_after_close_total`` once every
  session has closed (a session's own entries, its messages arrays, go with it; what sessions
  share stays).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import http.client
import itertools
import json
import multiprocessing
import queue
import random
import statistics
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import urlsplit

from lego_rl.bench.proxy_traffic import TRAFFIC, Traffic, call_arguments
from lego_rl.data import Generation, Sampling
from lego_rl.kinds import Problem
from lego_rl.proxy.budgets import cache_bytes


def _tool_call(n: int) -> str:
    """The policy's text for tool call ``n`` (Qwen3's format)."""
    call = json.dumps({"name": "Bash", "arguments": call_arguments(n)})
    return f"<tool_call>\n{call}\n</tool_call>"


class PacedInference:
    """A backend that takes ``delay`` seconds and answers a fixed tool call. Its replies are
    tokenized once up front, so its own work does not count as the proxy's."""

    def __init__(self, tokenizer: Any, delay: float):
        self.tokenizer, self.delay, self.policy_version = tokenizer, delay, 0
        self.turn = 0
        self.replies = [
            [*tokenizer.encode(_tool_call(n), add_special_tokens=False), tokenizer.eos_token_id]
            for n in range(7)
        ]

    def generate(
        self, prompt_ids: Sequence[int], sampling: Sampling, on_token: Any = None
    ) -> Generation:
        if self.delay:
            time.sleep(self.delay)
        self.turn += 1
        ids = list(self.replies[self.turn % 7])
        return Generation(completion_ids=ids, logprobs=[-0.1] * len(ids))

    def preflight(self) -> list[Problem]:
        return []


Latency = tuple[int, int, float, int]
"""(session index, call index within the session, seconds, request bytes) of one call."""


@dataclass(frozen=True)
class Pacing:
    """A harness's time between calls (running the tools the model asked for): ``pause``
    seconds on average, each pause drawn uniformly within ``jitter`` of it (0.5: 0.5x-1.5x),
    the same draws for a session in every run (so runs compare call by call). With no jitter,
    sessions that start together call together to the end (lockstep)."""

    pause: float
    jitter: float = 0.0

    def pauses(self, session: int) -> Iterator[float]:
        draw = random.Random(session)
        while True:
            yield self.pause * (1 + self.jitter * (2 * draw.random() - 1))


def _load(
    dialect: str,
    url: str,
    sessions: list[tuple[str, str]],
    turns: int,
    pacing: Pacing,
    seconds: float,
    repeat: bool,
    out: Any,
) -> None:
    """Child process: each session runs ``turns`` calls in its own thread, within ``seconds``
    of the sessions' start (``repeat``: then new conversations until ``seconds`` are up; the
    first one is always finished); puts its Latencies."""
    traffic = TRAFFIC[dialect]()
    shared = traffic.shared()
    latencies: list[Latency] = []
    lock = threading.Lock()
    parts = urlsplit(url)
    host = parts.hostname
    assert host is not None, url  # the server's own http://host:port URL

    def run(index: int, sid: str, key: str) -> None:
        conn = http.client.HTTPConnection(host, parts.port, timeout=60)
        conversation = traffic.first(index)
        pauses = pacing.pauses(index)
        time.sleep(pacing.pause * (index % 16) / 16)  # trials start in groups, staggered
        for call in itertools.count() if repeat else range(turns):
            turn = call % turns
            if time.monotonic() > deadline and not (repeat and call < turns):
                return
            if call and not turn:
                conversation = traffic.first(index)
            data = traffic.body(conversation, shared)
            start = time.perf_counter()
            conn.request("POST", f"/s/{sid}{traffic.path}", data, traffic.headers(key))
            response = conn.getresponse()
            raw = response.read()
            elapsed = time.perf_counter() - start
            if response.status != 200:
                raise RuntimeError(f"server answered {response.status}: {raw[:300]!r}")
            with lock:
                latencies.append((index, call, elapsed, len(data)))
            traffic.next_turn(conversation, json.loads(raw), turn)
            if pacing.pause:
                time.sleep(next(pauses))

    threads = [
        threading.Thread(target=run, args=(i, sid, key)) for i, (sid, key) in enumerate(sessions)
    ]
    deadline = time.monotonic() + seconds  # from here: the child's start-up is not the load's
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(latencies)


@dataclass(frozen=True)
class Load:
    """One run: ``sessions`` sessions of ``traffic`` making ``turns`` calls each (``repeat``: then
    new conversations, until ``seconds`` are up) at ``pacing``, against a backend that takes
    ``delay`` seconds a call."""

    traffic: Traffic
    tokenizer: Any
    delay: float
    sessions: int
    turns: int
    pacing: Pacing
    seconds: float
    repeat: bool = False


def _drive(load: Load, url: str, sessions: list[tuple[str, str]]) -> dict[str, Any]:
    """Run the load process against ``url``: its latencies, and this process's CPU, wall time
    and collector pauses meanwhile."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    args = (load.traffic.dialect, url, sessions, load.turns, load.pacing, load.seconds, load.repeat)
    child = ctx.Process(target=_load, args=(*args, out))
    with GcPauses() as pauses:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        child.start()
        latencies = _latencies(child, out)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    child.join(10)
    return {"latencies": latencies, "cpu_s": cpu, "wall_s": wall, "gc": pauses.summary()}


def _latencies(child: Any, out: Any) -> list[Latency]:
    """What the load process puts, however long it runs; an error if it ends without it."""
    while True:
        try:
            return out.get(timeout=1.0)
        except queue.Empty:
            if not child.is_alive():
                try:
                    return out.get(timeout=1.0)  # put just before it ended
                except queue.Empty:
                    raise RuntimeError(
                        f"the load process ended (exit code {child.exitcode}) without its "
                        "latencies; its error is above"
                    ) from None


class GcPauses:
    """Collector pauses of this (the proxy's) process while installed, per generation."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append((info["generation"], time.perf_counter() - self._started))

    def __enter__(self) -> Self:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def summary(self) -> dict[str, float]:
        full = [d for g, d in self.pauses if g == 2]
        return {
            "gc_collections": len(self.pauses),
            "gc_full_collections": len(full),
            "gc_max_pause_ms": max((d for _, d in self.pauses), default=0.0) * 1e3,
            "gc_total_pause_ms": sum(d for _, d in self.pauses) * 1e3,
        }


def _serve_load(load: Load) -> dict[str, Any]:
    """The load through the proxy, with what its caches and twins counted."""
    from lego_rl.proxy.native_templates import template_twin
    from lego_rl.proxy.server import ProxyServer

    server = ProxyServer(
        PacedInference(load.tokenizer, load.delay),
        {load.traffic.dialect: load.traffic.build()},
        model_name="policy",
        max_context=200_000,
    )
    server.start()
    try:
        opened = [
            server.open_session(
                f"bench-{i}", load.traffic.dialect, sampling=Sampling(max_tokens=256)
            )
            for i in range(load.sessions)
        ]
        sessions = [(s.id, s.api_key) for s in opened]
        run = _drive(load, server.url, sessions)
        calls = [c for s in opened for c in s.calls]
        gc.collect()  # earlier runs' caches are gone, not waiting for a collection
        held = cache_bytes()
        for s in opened:
            server.close_session(s.id)
        prefixes = server.handler.prefix_cache
        assert prefixes is not None  # a CallHandler makes one when it is given none
        return run | {
            "cache_bytes": held,
            "cache_bytes_after_close": cache_bytes(),
            "extends_share": sum(c.extends_previous for c in calls) / max(1, len(calls)),
            "cache": (prefixes.hits, prefixes.misses),
            "chunks": dict(prefixes.chunks.counts),
            "twin": dict(prefixes.encoder.counts),
            "renders": dict(server.handler.renderer.counts),
            "template_twin": (
                dict(twin.counts) if (twin := template_twin(load.tokenizer, None)) else None
            ),
        }
    finally:
        server.stop()


def direct_app(traffic: Traffic, backend: PacedInference, executor: ThreadPoolExecutor) -> Any:
    """The backend behind a bare endpoint: read the body, generate in a thread of ``executor``
    (as many as the proxy's, so neither queues), answer a fixed reply with a tool call in the
    traffic's dialect (the proxy's reply to the backend's text)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    replies = [json.dumps(traffic.reply(n)).encode() for n in range(7)]

    async def answer(request: Request) -> Response:
        await request.body()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(executor, backend.generate, (), Sampling())
        return Response(replies[backend.turn % 7], media_type="application/json")

    return Starlette(routes=[Route("/s/{sid}" + traffic.path, answer, methods=["POST"])])


def _direct_load(load: Load) -> dict[str, Any]:
    """The same load against the backend behind a bare endpoint."""
    from lego_rl.proxy.threaded import ThreadedServer

    executor = ThreadPoolExecutor(256, thread_name_prefix="bench-direct")
    server = ThreadedServer(
        direct_app(load.traffic, PacedInference(load.tokenizer, load.delay), executor),
        "127.0.0.1",
        0,
        "bench-direct",
    )
    port = server.start(30, "the direct endpoint did not start")
    try:
        sessions = [(f"direct-{i}", "") for i in range(load.sessions)]
        return _drive(load, f"http://127.0.0.1:{port}", sessions)
    finally:
        server.stop()
        executor.shutdown(wait=False)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _in_process_call(backend: PacedInference) -> float:
    """Seconds the backend takes called in process (median of 5)."""
    took = []
    for _ in range(5):
        t0 = time.perf_counter()
        backend.generate((1, 2, 3), Sampling())
        took.append(time.perf_counter() - t0)
    return statistics.median(took)


def _overheads(
    proxied: list[Latency], before: list[Latency], after: list[Latency], baseline: float
) -> dict[str, Any]:
    """Per call (session, turn) ran both ways: the proxy's latency minus the mean of the same
    call's direct latencies in the runs ``before`` and ``after`` it (what the machine's state
    drifts by between runs cancels, to first order); and, stricter, minus ``baseline`` (the
    backend called in process)."""
    first = {(s, t): lat for s, t, lat, _ in before}
    second = {(s, t): lat for s, t, lat, _ in after}
    by_call = {k: (lat + second[k]) / 2 for k, lat in first.items() if k in second}
    paired = [(lat - by_call[s, t]) * 1e3 for s, t, lat, _ in proxied if (s, t) in by_call]
    against_call = [(lat - baseline) * 1e3 for _, _, lat, _ in proxied]
    direct_ms = [(lat - baseline) * 1e3 for _, _, lat, _ in [*before, *after]]
    drift = [(second[k] - first[k]) * 1e3 for k in by_call]
    return {
        "paced_calls": len(proxied),
        "paired_calls": len(paired),
        "p50_overhead_ms": _percentile(paired, 0.50),
        "p99_overhead_ms": _percentile(paired, 0.99),
        "max_overhead_ms": max(paired),
        "p50_overhead_vs_call_ms": _percentile(against_call, 0.50),
        "p99_overhead_vs_call_ms": _percentile(against_call, 0.99),
        "direct_p50_http_ms": _percentile(direct_ms, 0.50),
        "direct_p99_http_ms": _percentile(direct_ms, 0.99),
        "direct_drift_p50_ms": _percentile(drift, 0.50),
    }


def _turn_costs(traffic: Traffic, tokenizer: Any, turns: int) -> dict[str, float]:
    """Render and tokenize costs of turn 1 and turn ``turns`` of one session (warm prefix cache)."""
    from lego_rl.proxy.pipeline import CallHandler
    from lego_rl.proxy.render import tokenize_prompt
    from lego_rl.proxy.session import ProxySession

    dialect = traffic.build()
    handler = CallHandler(PacedInference(tokenizer, 0.0), "policy", 1_000_000)
    shared = traffic.shared()
    handler.handle(
        ProxySession("warm", dialect.name, Sampling()),
        dialect,
        json.loads(traffic.body(traffic.first(99), shared)),
    )
    session = ProxySession("one", dialect.name, Sampling())
    conversation = traffic.first(0)
    costs: dict[int, tuple[float, float]] = {}
    for turn in range(1, turns + 1):
        request = dialect.parse(json.loads(traffic.body(conversation, shared)))
        if turn in (1, 2, turns):
            thread = session.threads[0] if session.threads else None
            context = thread.context if thread else None
            rendering = thread.rendering if thread else None
            best = (float("inf"), float("inf"))
            for _ in range(5):
                t0 = time.perf_counter()
                text, _ = handler.renderer.render(request, [rendering])
                t1 = time.perf_counter()
                tokenize_prompt(tokenizer, text, context, handler.prefix_cache)
                t2 = time.perf_counter()
                best = (min(best[0], t1 - t0), min(best[1], t2 - t1))
            costs[turn] = best
        reply = handler.handle(session, dialect, json.loads(traffic.body(conversation, shared)))
        traffic.next_turn(conversation, reply, turn)
    (r1, k1), (rn, kn), k2 = costs[1], costs[turns], costs[2][1]
    return {
        "tokenize_turn1_ms": k1 * 1e3,
        "tokenize_turn2_ms": k2 * 1e3,
        f"tokenize_turn{turns}_ms": kn * 1e3,
        "tokenize_turn100_over_turn1": kn / k1,
        "tokenize_turn100_over_turn2": kn / k2,
        "render_turn1_ms": r1 * 1e3,
        f"render_turn{turns}_ms": rn * 1e3,
        "render_tokenize_turn100_over_turn1": (rn + kn) / (r1 + k1),
        f"turn{turns}_body_kb": len(traffic.body(conversation, shared)) / 1024,
    }


def _tokenizer(name: str) -> Any:
    """The core's byte-level ``tiny``, or a tokenizer a plugin registers (``qwen3``:
    legorl-embedded's)."""
    if name == "tiny":
        from lego_rl.tiny_tokenizer import tiny_chat_tokenizer

        return tiny_chat_tokenizer()
    from lego_rl.registry import default_registry

    return default_registry().tokenizer(name)


def main(args: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="legorl bench proxy")
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--gen-ms", type=float, default=200.0)
    parser.add_argument("--pause-ms", type=float, default=1000.0, help="harness time between calls")
    parser.add_argument(
        "--pause-jitter",
        type=float,
        default=0.5,
        help="each pause within this share of --pause-ms (tools take varying time); 0: lockstep",
    )
    parser.add_argument("--paced-s", type=float, default=75.0, help="cap on the paced run")
    parser.add_argument("--throughput-s", type=float, default=15.0)
    parser.add_argument("--throughput-sessions", type=int, default=8)
    parser.add_argument("--tokenize-turns", type=int, default=100)
    parser.add_argument("--tokenizer", default="qwen3", help="tiny, or one a plugin registers (qwen3: the real vocabulary, legorl-embedded)")
    parser.add_argument(
        "--dialect",
        default="anthropic-messages",
        choices=sorted(TRAFFIC),
        help="the model API the load speaks: Claude Code's, Codex's (openai-responses) or a "
        "tool-calling agent's on Chat Completions",
    )
    opts = parser.parse_args(args)
    tokenizer = _tokenizer(opts.tokenizer)
    traffic = TRAFFIC[opts.dialect]()
    figures: dict[str, Any] = {"tokenizer": opts.tokenizer, "dialect": traffic.dialect}

    paced_load = Load(
        traffic,
        tokenizer,
        opts.gen_ms / 1e3,
        opts.sessions,
        opts.turns,
        Pacing(opts.pause_ms / 1e3, opts.pause_jitter),
        opts.paced_s,
    )
    direct = _direct_load(paced_load)
    paced = _serve_load(paced_load)
    direct_after = _direct_load(paced_load)
    baseline = _in_process_call(PacedInference(tokenizer, opts.gen_ms / 1e3))
    figures |= _overheads(
        paced["latencies"], direct["latencies"], direct_after["latencies"], baseline
    )
    sizes = [size for *_, size in paced["latencies"]]
    figures |= {
        "mean_body_kb": statistics.mean(sizes) / 1024,
        "first_body_kb": min(sizes) / 1024,
        "extends_share": paced["extends_share"],
        "prefix_cache_hits_misses": list(paced["cache"]),
        "chunk_cache": paced["chunks"],
        "tokenizer_twin": paced["twin"],
        "renders": paced["renders"],
        "template_twin": paced["template_twin"],
        "paced_gc": paced["gc"],
        "cache_bytes": paced["cache_bytes"],
        "cache_bytes_total": sum(paced["cache_bytes"].values()),
        "cache_bytes_after_close": paced["cache_bytes_after_close"],
        "cache_bytes_after_close_total": sum(paced["cache_bytes_after_close"].values()),
    }

    closed = _serve_load(
        Load(
            traffic,
            tokenizer,
            0.0,
            opts.throughput_sessions * 4,
            opts.turns,
            Pacing(0.0),
            opts.throughput_s,
            repeat=True,
        )
    )
    calls = len(closed["latencies"])
    figures |= {
        "throughput_gc": closed["gc"],
        "throughput_calls": calls,
        "calls_per_s": calls / closed["wall_s"],
        "calls_per_s_per_core": calls / max(closed["cpu_s"], 1e-9),
    }
    figures |= _turn_costs(traffic, tokenizer, opts.tokenize_turns)
    figures["targets_met"] = {
        "p50_overhead_ms<2": figures["p50_overhead_ms"] < 2,
        "p99_overhead_ms<10": figures["p99_overhead_ms"] < 10,
        "calls_per_s_per_core>=500": figures["calls_per_s_per_core"] >= 500,
        "tokenize_turn100_over_turn1<2": figures["tokenize_turn100_over_turn1"] < 2,
    }
    return figures
