"""Token boundaries between calls: where a re-rendered history stops matching what was sampled.

A call whose rendered text extends the previous call's prompt + completion reuses those ids
verbatim (:func:`lego_rl.proxy.render.tokenize_prompt`), so its trained tokens are the sampled
ones by construction. Any other call starts a new segment, and this module says why and what it
cost: how many tokens of the previous context (prompt + sampled completion) the new prompt does
not reproduce, and whether the history was only re-rendered differently at the boundary,

- ``whitespace``: a newline or space added or trimmed around the echoed reply,
- ``special_token``: a special token (``<|im_end|>``, ``<|endoftext|>``) dropped or added,
- ``thinking``: the reply's thinking block dropped from the echoed history,

or really changed (``rewrite``: compaction, truncation, an edited message). A call with the
previous call's prompt again is a ``retry``. These are the most reported silent training bugs of
agent RL: trained as one sequence, such a history would put tokens the policy never sampled, or
a context it never saw, in the loss; here they only cost the segment, and are counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from lego_rl.proxy.render import Context
from lego_rl.token_ids import TokenIds, common_prefix

Kind = Literal["whitespace", "special_token", "thinking", "rewrite", "retry"]
DRIFTS: tuple[Kind, ...] = ("whitespace", "special_token", "thinking")
"""Kinds where the history is the same conversation, rendered differently at the boundary."""

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_THINKING = re.compile(re.escape(THINK_OPEN) + r".*?" + re.escape(THINK_CLOSE), re.S)
_WHITESPACE = re.compile(r"\s+")
_DELIMITED = r"<\|[^|<>\s]{1,64}\|>"
"""Special tokens as chat templates spell them (``<|im_start|>``), beside the tokenizer's own."""


@dataclass(frozen=True)
class Boundary:
    """How a call's prompt continues (or fails to continue) the previous call's context."""

    kind: Kind
    tokens: int
    """Tokens of the previous prompt + completion the new prompt does not reproduce."""
    sampled: int
    """Of those, sampled completion tokens."""

    @property
    def drift(self) -> bool:
        """The same conversation re-rendered differently at the boundary."""
        return self.kind in DRIFTS


class Normaliser:
    """Text with what a kind of drift may change taken out; built once per tokenizer."""

    def __init__(self, special_tokens: Iterable[str] = ()):
        named = sorted({t for t in special_tokens if t}, key=len, reverse=True)
        self.special = re.compile("|".join([*map(re.escape, named), _DELIMITED]))

    @classmethod
    def of(cls, tokenizer: Any) -> Normaliser:
        return cls(getattr(tokenizer, "all_special_tokens", None) or ())

    def kind(self, before: str, after: str) -> Kind:
        """The least drift that makes ``before`` (the old context from the first difference)
        the start of ``after`` (the new prompt from there); ``rewrite`` when none does. Each
        kind also allows the ones before it in :data:`DRIFTS`."""
        strips = (
            lambda s: _WHITESPACE.sub("", s),
            lambda s: self.special.sub("", s),
            lambda s: _THINKING.sub("", s),
        )
        for level, kind in enumerate(DRIFTS):
            a, b = before, after
            for strip in reversed(strips[: level + 1]):
                a, b = strip(a), strip(b)
            if b.startswith(a):
                return kind
        return "rewrite"


def classify(normaliser: Normaliser, previous: Context, text: str, ids: TokenIds) -> Boundary:
    """The boundary between a call's context and the next prompt (``text`` rendered, ``ids``
    tokenized) that does not extend it."""
    lost = len(previous.ids) - common_prefix(previous.ids, TokenIds.of(ids))
    sampled = min(len(previous.completion_ids), lost)
    if text == previous.prompt_text:
        return Boundary("retry", lost, sampled)
    before = previous.text
    at = common_prefix(before, text)
    if (tag := before.rfind("<", 0, at)) > before.rfind(">", 0, at):
        at = tag  # the texts part inside a tag ("<think>" and "<tool_call>" share "<t")
    opened = before.rfind(THINK_OPEN, 0, at)
    closed = before.find(THINK_CLOSE, opened) if opened >= 0 else -1
    if opened >= 0 and (closed < 0 or closed + len(THINK_CLOSE) > at):
        at = opened  # the difference is inside a thinking block: judge the whole block
    return Boundary(normaliser.kind(before[at:], text[at:]), lost, sampled)
