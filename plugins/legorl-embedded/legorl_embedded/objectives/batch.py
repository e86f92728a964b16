"""Training rows from recorded trajectories, and the token batch an objective sees.

One row per :class:`~lego_rl.data.Segment`, exactly as recorded: ids, loss mask and the
inference backend's log-probs are copied, never re-tokenized. The first token of a row is
never trained (nothing predicts it), whatever its mask says.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from lego_rl.data import Routing, TrialResult


@dataclass
class PolicyBatch:
    """What an objective needs for one micro-batch (all ``[B, T]`` unless noted).

    ``token_total`` and ``seq_total`` count the whole training step, so summing the
    losses of its micro-batches gives the loss of the step.
    """

    logprobs: Tensor
    """Current policy log-prob of each token (with grad)."""
    inference_logprobs: Tensor
    """Log-prob each token was sampled with by the inference backend (the behaviour policy)."""
    mask: Tensor
    """1.0 on trained (sampled) tokens."""
    advantages: Tensor
    """``[B]``: the advantage of the trial each row belongs to."""
    seq_tokens: Tensor
    """``[B]``: trained tokens of the row's whole trial (all its segments)."""
    token_total: float
    """Trained tokens in the whole step."""
    seq_total: float
    """Trials with trained tokens in the whole step."""
    old_logprobs: Tensor | None = None
    """Trainer log-probs before this update; None means this is the only update per batch,
    so the old policy is the current one, detached."""
    ref_logprobs: Tensor | None = None
    """Reference-policy log-probs, for a KL penalty."""
    trial: Tensor | None = None
    """``[B]`` index of each row's trial in the step (None: every row is its own trial). All
    rows of a trial are in the same micro-batch, so per-trial means are complete."""


@dataclass
class Rows:
    """Right-padded training rows of one step (``[N, T]`` unless noted)."""

    ids: Tensor
    mask: Tensor
    logprobs: Tensor
    lengths: Tensor
    """``[N]`` real (unpadded) length of each row."""
    advantages: Tensor
    """``[N]``."""
    trial: Tensor
    """``[N]`` index of the row's trial among the trials that produced rows."""
    seq_tokens: Tensor
    """``[N]`` trained tokens of the row's trial."""
    routing: list[list[Routing | None]] = field(default_factory=list)
    """Per row, the recorded routing aligned to its ids (empty lists where none)."""
    skipped: int = 0
    """Trials that gave no row (no trajectory or no trained token)."""

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def attention_mask(self) -> Tensor:
        return (torch.arange(self.ids.shape[1]) < self.lengths.unsqueeze(1)).long()

    @property
    def trained_tokens(self) -> int:
        return int(self.mask.sum().item())

    @property
    def trials(self) -> int:
        return int(self.trial.unique().numel())

    def select(self, index: Sequence[int]) -> Rows:
        """The given rows, with padding trimmed to their longest."""
        idx = torch.as_tensor(list(index), dtype=torch.long)
        width = int(self.lengths[idx].max().item()) if len(idx) else 0
        return replace(
            self,
            ids=self.ids[idx, :width],
            mask=self.mask[idx, :width],
            logprobs=self.logprobs[idx, :width],
            lengths=self.lengths[idx],
            advantages=self.advantages[idx],
            trial=self.trial[idx],
            seq_tokens=self.seq_tokens[idx],
            routing=[self.routing[i] for i in idx.tolist()] if self.routing else [],
        )

    def micro_batches(self, max_tokens: int) -> Iterator[Rows]:
        """Whole trials (every segment of a trial together, as sequence-level objectives
        need) packed so that a micro-batch's padded size stays within ``max_tokens``; a trial
        larger than that goes alone. Trials of similar length share a micro-batch."""
        by_trial: dict[int, list[int]] = {}
        for i, t in enumerate(self.trial.tolist()):
            by_trial.setdefault(t, []).append(i)
        width = {t: max(int(self.lengths[i]) for i in rows) for t, rows in by_trial.items()}
        chunk: list[int] = []
        for t in sorted(by_trial, key=width.__getitem__):  # ascending: the newest is the widest
            rows = by_trial[t]
            if chunk and width[t] * (len(chunk) + len(rows)) > max_tokens:
                yield self.select(chunk)
                chunk = []
            chunk.extend(rows)
        if chunk:
            yield self.select(chunk)


def build_rows(
    groups: Sequence[Sequence[TrialResult]],
    advantages: Sequence[Sequence[float]],
    *,
    subagents: bool = False,
) -> Rows:
    """One row per segment of every trial (``subagents``: its sub-agents' segments too, with the
    trial's advantage); ``advantages[g][i]`` belongs to ``groups[g][i]``."""
    seqs: list[tuple[list[int], list[int], list[float], list[Routing | None]]] = []
    adv: list[float] = []
    trial: list[int] = []
    seq_tokens: list[int] = []
    skipped = 0
    n_trials = 0
    for group, group_adv in zip(groups, advantages, strict=True):
        for result, a in zip(group, group_adv, strict=True):
            segments = [
                s
                for trajectory in result.trajectories(subagents=subagents)
                for s in trajectory.segments
                if _trained(s.loss_mask)
            ]
            if not segments:
                skipped += 1
                continue
            tokens = sum(_trained(s.loss_mask) for s in segments)
            for s in segments:
                _check_aligned(result.trial_id, s.ids, s.loss_mask, s.logprobs)
                mask = [0, *s.loss_mask[1:]]
                seqs.append((s.ids, mask, s.logprobs, list(s.routing)))
                adv.append(a)
                trial.append(n_trials)
                seq_tokens.append(tokens)
            n_trials += 1
    width = max((len(s[0]) for s in seqs), default=0)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.float32)
    logprobs = torch.zeros(len(seqs), width, dtype=torch.float32)
    for row, (s_ids, s_mask, s_lp, _) in enumerate(seqs):
        n = len(s_ids)
        ids[row, :n] = torch.tensor(s_ids, dtype=torch.long)
        mask[row, :n] = torch.tensor(s_mask, dtype=torch.float32)
        logprobs[row, :n] = torch.tensor(s_lp, dtype=torch.float32) * mask[row, :n]
    return Rows(
        ids=ids,
        mask=mask,
        logprobs=logprobs,
        lengths=torch.tensor([len(s[0]) for s in seqs], dtype=torch.long),
        advantages=torch.tensor(adv, dtype=torch.float32),
        trial=torch.tensor(trial, dtype=torch.long),
        seq_tokens=torch.tensor(seq_tokens, dtype=torch.float32),
        routing=[s[3] for s in seqs],
        skipped=skipped,
    )


def _trained(loss_mask: list[int]) -> int:
    """Trained tokens of a segment (its first token never is)."""
    return sum(loss_mask[1:])


def _check_aligned(trial_id: str, ids: list[int], mask: list[int], logprobs: list[float]) -> None:
    if not len(ids) == len(mask) == len(logprobs):
        raise ValueError(
            f"trial {trial_id}: a segment has {len(ids)} ids, {len(mask)} loss-mask entries and "
            f"{len(logprobs)} logprobs; they must align position by position (a recorder bug)"
        )
