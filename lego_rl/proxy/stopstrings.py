"""Stop strings (OpenAI's ``stop``, Anthropic's ``stop_sequences``): the reply ends where the
first of them appears. The client gets the text before it; the record keeps every sampled token
up to the one that completed it, so what the policy sampled is what it is trained on (an echo of
the reply without the stop string then starts a new segment, as any rewrite does). Tokens a
backend sampled past that point are dropped: autoregressive sampling makes the kept tokens, and
their log-probs, exactly those of a generation that had stopped there."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lego_rl.data import Generation
from lego_rl.proxy.streaming import IncrementalDecoder
from lego_rl.proxy.toolcalls import held_tail


class StopScanner:
    """Finds the first stop string in text that arrives piece by piece; a tail that may begin
    one is held back until the next piece decides it."""

    def __init__(self, stops: Sequence[str]):
        self.stops = [s for s in stops if s]
        self.hit: str | None = None
        """The stop string found, once found."""
        self._held = ""

    def push(self, text: str) -> str:
        """The part of the text so far that can be sent now (nothing once a stop string was found)."""
        if self.hit is not None or not text:
            return ""
        if not self.stops:
            return text
        text, self._held = self._held + text, ""
        found = [(at, stop) for stop in self.stops if (at := text.find(stop)) >= 0]
        if found:
            at, self.hit = min(found, key=lambda f: f[0])
            return text[:at]
        keep = max(held_tail(text, stop) for stop in self.stops)
        self._held = text[len(text) - keep :]
        return text[: len(text) - keep]

    def flush(self) -> str:
        """What was held back, at the end of a reply that met no stop string."""
        held, self._held = self._held, ""
        return held


def stop_watch(
    tokenizer: Any, stops: Sequence[str], stop_ids: Sequence[int]
) -> Callable[[int], str | None]:
    """Push sampled ids one by one: the stop string the latest completed, or None (a backend
    that watches its tokens stops where :func:`cut_at_stop` would cut)."""
    scanner = StopScanner(stops)
    decoder = IncrementalDecoder(tokenizer, list(stop_ids))

    def push(token: int) -> str | None:
        scanner.push(decoder.push(token))
        return scanner.hit

    return push


def cut_at_stop(
    tokenizer: Any, gen: Generation, stops: Sequence[str], stop_ids: Sequence[int]
) -> tuple[Generation, str | None]:
    """``gen`` up to the token whose text completes the first stop string, and that string
    (``gen`` unchanged and None when none appears)."""
    if not any(stops):
        return gen, None
    push = stop_watch(tokenizer, stops, stop_ids)
    for index, token in enumerate(gen.completion_ids):
        if (hit := push(token)) is not None:
            n = index + 1
            routing = gen.routing[:n] if gen.routing is not None else None
            kept = {"completion_ids": list(gen.completion_ids[:n]), "logprobs": list(gen.logprobs[:n])}
            return gen.model_copy(update={**kept, "routing": routing, "finish_reason": "stop"}), hit
    return gen, None
