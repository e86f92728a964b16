"""Continuous batching for the ``hf`` backend: concurrent ``generate()`` calls share one decode loop.

A worker thread owns the model while requests are in flight. A new request is prefilled
alone, exactly as an unbatched call would be (after the longest prefix it shares with a
recently prefilled prompt of the same policy version, whose keys and values are reused:
:mod:`~legorl_embedded.inference.prefix_cache`), draws its first token and joins the running
batch at the next step: its KV cache is left-padded to the batch's width and stacked under
the others', with an attention mask that hides the padding and explicit position ids, so
every row computes what it would compute alone. Each step feeds every row its last token,
records every row's routing and samples every row with its own :class:`Sampling` and
generator. Tokens reach the caller's thread through a queue, so ``on_token`` runs there and
a slow callback never stalls the batch. A request whose ``abort`` is set (its client went away)
leaves at the next step with what it drew (``finish_reason`` ``abort``); one still waiting to be
admitted leaves without a prefill.

:meth:`Batcher.paused` stops admitting, waits until no request is in flight and keeps the
worker off the model while the caller swaps weights: a batch never mixes policy versions.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from lego_rl.data import ABORTED, Generation, Sampling
from legorl_embedded.inference.prefix_cache import Prefilled, PrefixCache
from legorl_embedded.inference.sampling import draw_rows
from legorl_embedded.policy.output_vocab import OutputVocab
from legorl_embedded.policy.routing import RoutingRecorder, as_routing

IDLE_S = 2.0
"""The worker thread exits after this long without work (a new request starts another)."""


@dataclass(eq=False)
class Request:
    """One ``generate()`` call: its inputs, and the state the worker keeps while it decodes."""

    prompt: list[int]
    sampling: Sampling
    budget: int
    stops: frozenset[int]
    generator: torch.Generator
    events: queue.SimpleQueue[tuple[Any, ...]] = field(default_factory=queue.SimpleQueue)
    cancelled: bool = False
    version: int = 0
    completion: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    routing: list[torch.Tensor] = field(default_factory=list)
    prompt_routing: torch.Tensor | None = None
    length: int = 0
    """Real (unpadded) tokens in this row's KV cache: the position of the next token fed."""
    finishing: bool = False
    """Its last token is drawn; an MoE row is fed once more for that token's routing."""
    watch: Callable[[int], str | None] | None = None
    """Given each drawn token: the stop string it completed, if any (the request's stop strings)."""
    stopped_by: str | None = None
    abort: threading.Event | None = None
    """Set by the caller to end the generation early (:class:`lego_rl.kinds.AbortsGenerations`)."""

    @property
    def aborted(self) -> bool:
        return self.abort is not None and self.abort.is_set()

    def wait(self, on_token: Callable[[int, float], None] | None) -> Generation:
        """Block the caller until done, calling ``on_token`` (here) for each token as it comes."""
        try:
            while True:
                kind, *payload = self.events.get()
                if kind == "token":
                    if on_token is not None:
                        on_token(*payload)
                elif kind == "done":
                    return payload[0]
                else:
                    raise payload[0]
        except BaseException:
            self.cancelled = True  # the worker drops the row at its next step
            raise

    def accept(self, token: int, logprob: float) -> None:
        self.completion.append(token)
        self.logprobs.append(logprob)
        self.events.put(("token", token, logprob))
        if self.watch is not None and self.stopped_by is None:
            self.stopped_by = self.watch(token)
        self.finishing = (
            token in self.stops or len(self.completion) >= self.budget or self.stopped_by is not None
        )

    def finish(self) -> None:
        """Hand the caller its generation: as it ended, or as far as it got when aborted."""
        stopped = bool(self.completion) and (
            self.completion[-1] in self.stops or self.stopped_by is not None
        )
        ended = stopped or self.finishing or not self.aborted
        gen = Generation(
            completion_ids=self.completion,
            logprobs=self.logprobs,
            routing=as_routing(torch.cat(self.routing)) if self.routing else None,
            prompt_routing=None if self.prompt_routing is None else as_routing(self.prompt_routing),
            finish_reason=("stop" if stopped else "length") if ended else ABORTED,
            policy_version=self.version,
        )
        self.events.put(("done", gen))


class Batcher:
    """Runs every in-flight request of one model in a shared, growing and shrinking batch."""

    def __init__(
        self,
        model: Any,
        recorder: RoutingRecorder,
        *,
        vocab: OutputVocab,
        version: Callable[[], int],
        rng_lock: threading.Lock,
        max_batch: int = 32,
        prefix_cache_mb: int = 0,
    ) -> None:
        self.model, self.recorder, self.vocab = model, recorder, vocab
        self._version, self._rng_lock = version, rng_lock
        layers = getattr(DynamicCache(config=model.config), "layers", [])
        # Only plain full-attention caches can be padded and stacked; others decode one at a time.
        stackable = bool(layers) and all(type(layer) is DynamicLayer for layer in layers)
        self.max_batch = max_batch if stackable else 1
        self.prefixes = PrefixCache(prefix_cache_mb << 20) if stackable and prefix_cache_mb > 0 else None
        """Recent prompts' keys and values (plain full-attention caches only; None: off)."""
        self.device = next(model.parameters()).device
        self._cond = threading.Condition()
        self._waiting: list[Request] = []
        self._pauses = 0
        self._in_flight = 0
        self._thread: threading.Thread | None = None
        self._rows: list[Request] = []
        self._cache: Any = None
        self._mask = torch.zeros(0, 0, dtype=torch.long, device=self.device)
        self.stats = {"steps": 0, "row_steps": 0, "max_rows": 0}
        """Decode steps, rows summed over steps, the largest batch (for benchmarks and tests)."""

    # ------------------------------------------------------------ callers' side

    @property
    def waiting(self) -> int:
        """Requests submitted and not yet admitted."""
        return len(self._waiting)

    @property
    def pausing(self) -> bool:
        """Whether someone holds (or waits for) :meth:`paused`."""
        return self._pauses > 0

    @property
    def running(self) -> bool:
        """Whether the worker thread is alive (it exits after ``IDLE_S`` without work)."""
        return self._thread is not None

    def submit(self, request: Request) -> None:
        with self._cond:
            self._waiting.append(request)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="hf-batcher", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Admit nothing and wait until nothing is in flight; the model is the caller's inside."""
        with self._cond:
            self._pauses += 1
            try:
                self._cond.wait_for(lambda: self._in_flight == 0)
            except BaseException:
                self._pauses -= 1
                self._cond.notify_all()
                raise
        try:
            yield
        finally:
            with self._cond:
                self._pauses -= 1
                self._cond.notify_all()

    # ------------------------------------------------------------ the worker

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._rows and not self._admissible():
                    if not self._cond.wait(IDLE_S) and not self._waiting and not self._rows:
                        self._thread = None
                        return
                joining = self._take()
            try:
                with torch.inference_mode():
                    for request in joining:
                        self._admit(request)
                    if self._rows:
                        self._step()
            except Exception as exc:  # noqa: BLE001 - every waiting caller gets the error
                self._fail([*joining, *self._rows], exc)
            with self._cond:
                self._in_flight = len(self._rows)
                self._cond.notify_all()

    def _admissible(self) -> bool:
        return bool(self._waiting) and not self._pauses and len(self._rows) < self.max_batch

    def _take(self) -> list[Request]:
        """Requests to admit now (called under the lock); they count as in flight from here."""
        if self._pauses:
            return []
        for request in [r for r in self._waiting if r.aborted or r.cancelled]:
            self._waiting.remove(request)  # gone before its prefill: nothing to compute
            if not request.cancelled:
                request.finish()
        room = self.max_batch - len(self._rows)
        joining, self._waiting = self._waiting[:room], self._waiting[room:]
        version = self._version()
        for request in joining:
            request.version = version
        self._in_flight = len(self._rows) + len(joining)
        return joining

    def _admit(self, request: Request) -> None:
        """Prefill alone (after the longest prefix a recent prompt shares, if any), draw the
        first token, join the batch (unless already done)."""
        prompt = torch.tensor(request.prompt, dtype=torch.long)
        shared, known = self.prefixes.longest(prompt, request.version) if self.prefixes is not None else (0, None)
        past = None
        if known is not None:
            past = DynamicCache(config=self.model.config)
            for layer, (keys, values) in enumerate(known.layers):
                past.update(keys[:, :, :shared], values[:, :, :shared], layer)
        with self.recorder as recorder:
            out = self.model.base_model(
                input_ids=prompt[None, shared:].to(self.device), past_key_values=past, use_cache=True
            )
            routed = recorder.pop()
        if known is not None and known.routing is not None and routed is not None:
            routed = torch.cat([known.routing[:shared], routed])
        request.prompt_routing = routed
        if self.prefixes is not None:
            layers = tuple((layer.keys, layer.values) for layer in out.past_key_values.layers)
            self.prefixes.add(Prefilled(prompt, layers, routed), request.version)
        request.length = len(request.prompt)
        self._sample([request], out.last_hidden_state[:, -1])
        if not self._settled(request):
            self._join(request, out.past_key_values)

    def _step(self) -> None:
        """One token for every row: feed each its last token, record routing, sample."""
        rows = self._rows
        ids = torch.tensor([[r.completion[-1]] for r in rows], dtype=torch.long, device=self.device)
        positions = torch.tensor([[r.length] for r in rows], dtype=torch.long, device=self.device)
        self._mask = F.pad(self._mask, (0, 1), value=1)
        with self.recorder as recorder:
            out = self.model.base_model(
                input_ids=ids,
                attention_mask=self._mask,
                position_ids=positions,
                past_key_values=self._cache,
                use_cache=True,
            )
            routed = recorder.pop()
        self.stats["steps"] += 1
        self.stats["row_steps"] += len(rows)
        self.stats["max_rows"] = max(self.stats["max_rows"], len(rows))
        for i, request in enumerate(rows):
            request.length += 1
            if routed is not None:
                request.routing.append(routed[i : i + 1])
        live = [i for i, r in enumerate(rows) if not (r.finishing or r.cancelled or r.aborted)]
        done = {r for r in rows if r.finishing or r.cancelled or r.aborted}
        if live:
            self._sample([rows[i] for i in live], out.last_hidden_state[live, -1])
            done |= {rows[i] for i in live if self._ends(rows[i])}
        self._drop(done)  # before the callers hear: a returned generation's slot is free
        for request in done:
            if not request.cancelled:
                request.finish()  # an MoE row fed once more: its last token's routing is in

    def _ends(self, request: Request) -> bool:
        """Whether a request whose last token is drawn is done, or needs one more forward for
        that token's routing (MoE)."""
        return request.finishing and not self.recorder.is_moe

    def _settled(self, request: Request) -> bool:
        """Finish a request (not in the batch yet) that :meth:`_ends`; True when it did."""
        if self._ends(request):
            request.finish()
            return True
        return False

    def _sample(self, requests: list[Request], hidden: torch.Tensor) -> None:
        """Draw the next token of each request from its row of ``hidden`` (last hidden states)."""
        logits = self.vocab.logits(self.model, hidden).cpu()
        with self._rng_lock:
            rows, logprobs = draw_rows(
                logits, [r.sampling for r in requests], [r.generator for r in requests]
            )
        tokens = self.vocab.token_ids(torch.tensor(rows)).tolist()
        for request, token, logprob in zip(requests, tokens, logprobs, strict=True):
            request.accept(token, logprob)

    # ------------------------------------------------------------ the batch's KV cache

    def _join(self, request: Request, cache: Any) -> None:
        """Stack ``cache`` (one row) under the batch's, left-padding the shorter to one width."""
        mask = torch.ones(1, request.length, dtype=torch.long, device=self.device)
        if not self._rows:
            self._rows, self._cache, self._mask = [request], cache, mask
            return
        width = max(self._mask.shape[1], request.length)
        for mine, theirs in zip(self._cache.layers, cache.layers, strict=True):
            mine.keys = torch.cat([_left_pad(mine.keys, width), _left_pad(theirs.keys, width)])
            mine.values = torch.cat([_left_pad(mine.values, width), _left_pad(theirs.values, width)])
        self._mask = torch.cat([_left_pad(self._mask, width), _left_pad(mask, width)])
        self._rows.append(request)

    def _drop(self, gone: set[Request]) -> None:
        """Remove finished rows, then the leading columns that are padding in every row left."""
        if not gone:
            return
        keep = [i for i, r in enumerate(self._rows) if r not in gone]
        self._rows = [self._rows[i] for i in keep]
        if not self._rows:
            self._cache, self._mask = None, self._mask[:0, :0]
            return
        index = torch.tensor(keep, dtype=torch.long, device=self.device)
        self._mask = self._mask[index]
        start = int(self._mask.any(dim=0).long().argmax())
        self._mask = self._mask[:, start:]
        for layer in self._cache.layers:
            layer.keys = layer.keys[index, :, start:]
            layer.values = layer.values[index, :, start:]

    def _fail(self, requests: list[Request], exc: Exception) -> None:
        """Hand ``exc`` to every caller in flight and start over with an empty batch."""
        requests = list(dict.fromkeys(requests))
        error = RuntimeError(
            f"hf inference failed while decoding a batch of {len(requests)} requests: "
            f"{type(exc).__name__}: {exc}"
        )
        error.__cause__ = exc
        for request in requests:
            request.events.put(("error", error))
        self._rows, self._cache, self._mask = [], None, self._mask[:0, :0]


def _left_pad(x: torch.Tensor, width: int) -> torch.Tensor:
    """Zeros on the left of the sequence dimension up to ``width``: a mask ``(batch, seq)``
    or keys/values ``(batch, heads, seq, dim)``."""
    if x.dim() == 2:
        return F.pad(x, (width - x.shape[1], 0))
    return F.pad(x, (0, 0, width - x.shape[-2], 0))
