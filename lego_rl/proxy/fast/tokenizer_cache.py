"""Fast, exact tokenization for the proxy: the Rust backend called directly, and text tokenized
from scratch piece by piece with the pieces' ids cached across sessions.

``Encoder.encode`` is ``tokenizer.encode(text, add_special_tokens=False)``; for a Hugging Face
fast tokenizer in its plain state (no truncation, padding or special-token splitting set) it
runs a tiktoken twin of the tokenizer where one exists (Qwen's vocabulary: ~0.2 us a character
instead of ~1.1), else calls the ``tokenizers`` backend directly, skipping transformers' per-call
bookkeeping and releasing the GIL while it tokenizes. Each shortcut is taken only after it
agreed with the plain call on probe texts; the twin is checked again on real texts.

``ChunkCache`` serves a thread's first call (or a rewritten history), which is tokenized from
scratch: with Qwen3's backend ~1.4 us a character, ~12 ms for a first user message of
Claude Code's size (the twin: ~0.2 us a character), though most of that text recurs from
session to session (the harness's reminders, the task all sessions of a group share). The text
is cut where a line break is followed by a character other than whitespace; a pre-tokenizer of
the GPT/Qwen regex kind never joins text across such a cut, so the pieces' ids, concatenated,
are the ids of the whole. A
tokenizer that does not behave so (e.g. SentencePiece's leading-space marker) is caught: the
chunked ids are compared with the plain tokenization on a probe text, on the first
``verify_first`` real texts and every ``check_every``-th after; one disagreement turns chunking
off for that cache (counted in ``mismatches``), and the plain ids are returned.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from lego_rl.proxy.budgets import ByteLRU, MiB, ids_size
from lego_rl.proxy.fast.tiktoken_twin import tiktoken_twin

CUT = re.compile(r"(?<=\n)(?=\S)")
"""Where text may be cut: after a line break, before anything but whitespace."""

PROBE = (
    "<|im_start|>system\nYou are a coding agent.  Be brief.\n\n# Tools\n"
    '{"name": "bash", "parameters": {"type": "object"}}\n<|im_end|>\n'
    "<|im_start|>user\n  indented line\n\ttab\nWörter ñ 中文 123 4567\n"
    "-rw-r--r-- 1 root root 1234 file.py\n!!!\n\n\nx = f(y)  # comment\n"
    "café\u0301 ﬁ\n<|im_end|>\n<|im_start|>assistant\n"
)
"""Text that exercises the cut: special tokens, indentation, blank lines, unicode, digits."""


PROBE_MORE = (
    "DON'T 'S 'll We'RE it's\r\n\r\n   \n\t x  y   \n  z\u00a0w \u3000 \ud55c\uad6d\uc5b4 \U0001f600 "
    "1234567890 3.14 e\u0301 \u212b A\u030a <tool_call>{\"a\": 1}</tool_call><think>\n\n</think>"
)
"""More text for a tiktoken twin: contractions in any case, whitespace runs, composed and
decomposed characters (the NFC step), emoji, added tokens."""


T = TypeVar("T")


class SpotCheck(Generic[T]):
    """Keeps a shortcut honest: its result is compared with the exact one on the first
    ``first`` uses and every ``every``-th after; one disagreement turns it off (``on``), and
    the exact result is what the caller gets whenever it was computed."""

    def __init__(self, first: int, every: int, uses: str = "uses"):
        self.first, self.every, self.uses = first, every, uses
        self.on = True
        self.lock = threading.Lock()
        self.counts = {uses: 0, "checks": 0, "mismatches": 0}

    def run(self, fast: T, exact: Callable[[], T]) -> T:
        """``fast`` (the shortcut's result), or ``exact()`` when a check is due."""
        with self.lock:
            self.counts[self.uses] += 1
            n = self.counts[self.uses]
        if n > self.first and (self.every <= 0 or n % self.every != 0):
            return fast
        reference = exact()
        with self.lock:
            self.counts["checks"] += 1
            if reference != fast:
                self.counts["mismatches"] += 1
                self.on = False
        return reference


def readable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, as tiktoken reads it. JSON can
    escape a lone surrogate (a harness that cut a string inside a surrogate pair), the proxy's
    reader keeps it as ``json`` does, and no tokenizer can encode it."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _readable_on_failure(
    encode: Callable[[list[str]], list[list[int]]], texts: list[str]
) -> list[list[int]]:
    """``encode(texts)``; where the tokenizer refuses a text for a lone surrogate, the ids of
    :func:`readable` of the texts (the check costs nothing until a text fails)."""
    try:
        return encode(texts)
    except (TypeError, UnicodeEncodeError):
        fixed = [readable(t) for t in texts]
        if fixed == texts:
            raise
        return encode(fixed)


class Encoder:
    """``tokenizer.encode(text, add_special_tokens=False)`` as a list, by the fastest exact way:
    a tiktoken twin (:mod:`lego_rl.proxy.fast.tiktoken_twin`) when one exists, else the Rust backend direct.

    The twin is used only after it agreed with the tokenizer on the probes, and is compared with
    it again on the first ``verify_first`` texts and every ``check_every``-th after; one
    disagreement turns it off (``counts["mismatches"]``) and that text gets the backend's ids."""

    def __init__(self, tokenizer: Any, *, verify_first: int = 8, check_every: int = 256):
        self.tokenizer = tokenizer
        backend = getattr(tokenizer, "backend_tokenizer", None)
        self._backend = backend if hasattr(backend, "encode_batch") else None
        if self._backend is not None and self._direct([PROBE])[0] != self._plain(PROBE):
            self._backend = None
        self._twin = tiktoken_twin(tokenizer)
        if self._twin is not None and any(
            self._twin(p) != self._reference([p])[0] for p in (PROBE, PROBE_MORE)
        ):
            self._twin = None
        self.check: SpotCheck[list[int]] = SpotCheck(verify_first, check_every, uses="twin")
        self.counts = self.check.counts

    @property
    def twin(self) -> bool:
        """Whether texts go through the tiktoken twin."""
        return self._twin is not None and self.check.on

    def _plain(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _direct(self, texts: list[str]) -> list[list[int]]:
        backend = self._backend
        assert backend is not None  # called only where the backend is known to be there
        encodings = backend.encode_batch(texts, add_special_tokens=False)
        return [e.ids for e in encodings]

    def _usable(self) -> bool:
        """The backend is in the state transformers' own encode would leave it in."""
        backend = self._backend
        return (
            backend is not None
            and backend.truncation is None
            and backend.padding is None
            and not getattr(backend, "encode_special_tokens", False)
            and not getattr(self.tokenizer, "split_special_tokens", False)
        )

    def _reference(self, texts: list[str]) -> list[list[int]]:
        """The tokenizer's own ids (through its backend when that is exact), of
        :func:`readable` texts where a text holds a lone surrogate."""
        if self._usable():
            return _readable_on_failure(self._direct, texts)
        return _readable_on_failure(lambda some: [self._plain(t) for t in some], texts)

    def _twinned(self, text: str) -> list[int] | None:
        """The twin's ids (checked when due); None when there is no (longer a) twin."""
        twin = self._twin
        if twin is None or not self.check.on or not self._usable():
            return None
        return self.check.run(twin(text), lambda: self._reference([text])[0])

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        ids = self._twinned(text)
        return ids if ids is not None else self._reference([text])[0]

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        """Several texts (without a twin, in one backend call that tokenizes them in parallel)."""
        if self.twin:
            return [self.encode(t) for t in texts]
        return self._reference(texts)


def pieces(text: str, min_chars: int) -> list[str]:
    """``text`` cut at :data:`CUT` into pieces of at least ``min_chars`` (but the last): texts
    that start alike are cut alike, so their common pieces are found in the cache."""
    out: list[str] = []
    current = ""
    for line in CUT.split(text):
        current += line
        if len(current) >= min_chars:
            out.append(current)
            current = ""
    if current:
        out.append(current)
    return out


class ChunkCache:
    """Ids of text pieces, least recently used first out past ``budget`` bytes (each piece's
    text and ids, :func:`~lego_rl.proxy.budgets.ids_size`; what a failed request added is
    taken back)."""

    def __init__(
        self,
        encoder: Encoder,
        *,
        min_chars: int = 256,
        budget: int = 256 * MiB,
        verify_first: int = 4,
        check_every: int = 64,
    ):
        self.encoder, self.min_chars = encoder, min_chars
        self.check: SpotCheck[list[int]] = SpotCheck(verify_first, check_every, uses="texts")
        self.entries: ByteLRU[str, tuple[int, ...]] = ByteLRU("tokenizer.chunks", budget)
        """Cached ids as tuples: the garbage collector skips them (it walks every list)."""
        self.lock = threading.Lock()
        self.found = {"hits": 0, "misses": 0}
        self.cut_safe = self._chunked(PROBE) == encoder.encode(PROBE)

    @property
    def usable(self) -> bool:
        """Whether text is tokenized piece by piece (the probe agreed, no check disagreed)."""
        return self.cut_safe and self.check.on

    @property
    def counts(self) -> dict[str, int]:
        return self.check.counts | self.found

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``, exactly as the plain tokenization gives them."""
        if not self.usable or len(text) < 2 * self.min_chars:
            return self.encoder.encode(text)
        return self.check.run(self._chunked(text), lambda: self.encoder.encode(text))

    def _chunked(self, text: str) -> list[int]:
        parts = pieces(text, self.min_chars)
        found: list[Sequence[int] | None] = []
        for part in parts:
            entry = self.entries.get(part)
            found.append(entry.value if entry is not None else None)
        missing = [p for p, ids in zip(parts, found, strict=True) if ids is None]
        fresh = iter(self.encoder.encode_many(missing) if missing else [])
        out: list[int] = []
        with self.lock:
            self.found["hits"] += len(parts) - len(missing)
            self.found["misses"] += len(missing)
            for part, ids in zip(parts, found, strict=True):
                if ids is None:
                    ids = next(fresh)
                    self._store(part, ids)
                out += ids
        return out

    def _store(self, part: str, ids: Sequence[int]) -> None:
        if part not in self.entries:
            kept = tuple(ids)
            self.entries.put(part, kept, sys.getsizeof(part) + ids_size(kept))
