"""Which token ids the policy can emit: the rows of its output head that sampling and
scoring use.

A tiny policy over the Qwen3 vocabulary spends most of its compute in the 151k-row output
head. ``model.config.output_vocab: N`` restricts what the model emits to the N lowest ids
(byte-level BPE numbers its tokens in merge order: the 256 bytes first, then the most
frequent merges, so any text can still be written), the tokenizer's added tokens (chat and
tool-call markers) and ``model.config.output_vocab_extra`` (the warm start adds the tokens
of its demonstrations' replies there, so their usual tokenization stays emittable). The
model still reads every id. Ids outside have probability 0 in sampling and in scoring
alike, so the log-probs recorded at inference and recomputed by the trainer are of the same
distribution. Both keys are saved in the checkpoint's config.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor


@dataclass(frozen=True)
class OutputVocab:
    """The emittable ids: every id below ``size``, or the sorted subset ``ids``."""

    size: int
    """Ids the tokenizer can decode; a wider head's extra rows are never emitted."""
    ids: Tensor | None = None
    _rows: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """Sampling's copy of the head's emittable rows, with the weight version it was cut from."""

    @classmethod
    def of(cls, config: Any, tokenizer_size: int, added: Iterable[int] = ()) -> OutputVocab:
        """From a model config's ``output_vocab`` / ``output_vocab_extra`` (none: every id
        the tokenizer decodes); ``added`` are the tokenizer's added-token ids."""
        first = getattr(config, "output_vocab", None)
        if first is None:
            return cls(tokenizer_size)
        if not isinstance(first, int) or first < 256:
            raise ValueError(
                f"model.config.output_vocab must be an integer >= 256 (the byte tokens), got {first!r}"
            )
        extra = getattr(config, "output_vocab_extra", None) or []
        chosen = set(range(min(first, tokenizer_size))) | set(added) | set(extra)
        ids = torch.tensor(sorted(i for i in chosen if 0 <= i < tokenizer_size), dtype=torch.long)
        return cls(tokenizer_size, ids) if len(ids) < tokenizer_size else cls(tokenizer_size)

    @property
    def rows(self) -> int:
        """How many ids the head emits."""
        return self.size if self.ids is None else len(self.ids)

    def head(self, weight: Tensor, bias: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """The output head's weight and bias cut to the emittable rows (autograd-friendly)."""
        if self.ids is None:
            return weight[: self.size], None if bias is None else bias[: self.size]
        ids = self.ids.to(weight.device)
        return weight.index_select(0, ids), None if bias is None else bias.index_select(0, ids)

    def logits(self, model: Any, hidden: Tensor) -> Tensor:
        """Float logits over the emittable rows for ``hidden`` (last hidden states), without
        gradient. The cut rows are kept until the weights change in place (a weight load)."""
        out = model.get_output_embeddings()
        if self.ids is None:
            return out(hidden)[..., : self.size].float()  # the head module itself (and its hooks)
        key = tuple((t.data_ptr(), t._version) for t in (out.weight, out.bias) if t is not None)
        if self._rows.get("key") != key:
            with torch.no_grad():
                self._rows.update(key=key, head=self.head(out.weight, out.bias))
        weight, bias = self._rows["head"]
        return torch.nn.functional.linear(hidden, weight, bias).float()

    def token_ids(self, rows: Tensor) -> Tensor:
        """Head rows -> token ids."""
        return rows if self.ids is None else self.ids.to(rows.device)[rows]

    def row_of(self, tokens: Tensor) -> Tensor:
        """Token ids -> head rows; -1 where a token cannot be emitted."""
        if self.ids is None:
            return torch.where(tokens < self.size, tokens, torch.full_like(tokens, -1))
        ids = self.ids.to(tokens.device)
        at = torch.searchsorted(ids, tokens).clamp_max(len(ids) - 1)
        return torch.where(ids[at] == tokens, at, torch.full_like(tokens, -1))


def model_output_vocab(model: Any, tokenizer: Any) -> OutputVocab:
    """The output vocabulary of ``model`` with ``tokenizer`` (see the module doc)."""
    from legorl_embedded.policy.tokenizer import vocab_size

    return OutputVocab.of(model.config, vocab_size(tokenizer), added_ids(tokenizer))


def added_ids(tokenizer: Any) -> list[int]:
    """Ids of the tokenizer's added tokens (Qwen3: the chat, tool-call and thinking markers)."""
    return sorted(getattr(tokenizer, "added_tokens_decoder", {}) or {})
