"""Routing replay: force a training forward to route each token to its recorded experts.

A forward hook on every router (see :func:`~legorl_embedded.policy.routing.find_routers`) replaces
the router's top-k indices with the ones recorded at inference and its gate weights with the
router's own probabilities of those experts, renormalised over them when the router
normalises its top-k (``norm_topk_prob``, Mixtral-style routers always do). The weights stay
a function of the router logits, so the router still receives gradient.

The recorded experts are looked up by the row the router sees (batch-major, then position):
no cursor advances through the sequence, so a recomputation under gradient checkpointing
replays exactly the same routing. Keep the context open over ``backward()`` for that.
Tokens without recorded routing (padding, prompt tokens never captured, another model's
segments) route natively. In both modes the hook also counts how often the router's own
choice agrees with the recorded one (as a set of experts, per token and layer).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch
from torch import Tensor, nn

from lego_rl.data import Routing
from legorl_embedded.policy.routing import find_routers, hooked


@dataclass
class RoutingTable:
    """Recorded experts of one ``[B, T]`` batch, flattened as the routers see it."""

    experts: Tensor
    """``(B * T, layers, k)`` long; zeros where unknown."""
    known: Tensor
    """``(B * T,)`` bool: the token has recorded routing."""
    width: int = 0
    """T, the padded row length (0: a single sequence of ``len(known)`` tokens)."""

    @property
    def recorded(self) -> int:
        return int(self.known.sum().item())

    def rows(self) -> tuple[Tensor, Tensor]:
        """(experts ``[B, T, layers, k]``, known ``[B, T]``)."""
        width = self.width or len(self.known)
        return self.experts.unflatten(0, (-1, width)), self.known.unflatten(0, (-1, width))

    def same_in_every_row(self) -> Tensor:
        """``[T]`` bool: every row recorded the same routing (or none) at that position."""
        experts, known = self.rows()
        return (known == known[:1]).all(0) & (experts == experts[:1]).flatten(2).all(-1).all(0)

    def passes(self, prefix: int) -> dict[str, RoutingTable]:
        """The tables of a shared-prefix forward (see legorl_embedded.policy.prefix): the prefix as
        row 0 holds it, then the rest of every row."""
        experts, known = self.rows()
        return {
            "full": self,
            "prefix": RoutingTable(experts[0, :prefix], known[0, :prefix], prefix),
            "rest": RoutingTable(experts[:, prefix:].flatten(0, 1), known[:, prefix:].flatten(), experts.shape[1] - prefix),
        }


def routing_table(
    routing: Sequence[Sequence[Routing | None]], width: int, layers: int, k: int
) -> RoutingTable:
    """A table for ``len(routing)`` rows padded to ``width``; raises if a recorded shape is wrong."""
    experts = torch.zeros(len(routing), width, layers, k, dtype=torch.long)
    known = torch.zeros(len(routing), width, dtype=torch.bool)
    for row, per_position in enumerate(routing):
        where = [p for p, r in enumerate(per_position[:width]) if r is not None]
        if not where:
            continue
        values = torch.tensor([per_position[p] for p in where], dtype=torch.long)
        if values.shape[1:] != (layers, k):
            raise ValueError(
                f"recorded routing has {tuple(values.shape[1:])} (layers, experts per token) but "
                f"the model routes ({layers}, {k}); the segments come from another model — "
                f"train with trainer.options.routing_replay: off"
            )
        experts[row, where] = values
        known[row, where] = True
    return RoutingTable(experts.flatten(0, 1), known.flatten(), width)


class RoutingReplay:
    """While active, routers of ``model`` follow ``table`` (``replay=True``) or only compare.

    A no-op for dense models or when ``table`` is None. After a forward, :attr:`agreement`
    holds per layer ``(agreeing, compared)`` counts for the tokens with recorded routing.
    """

    def __init__(self, model: nn.Module, table: RoutingTable | None, *, replay: bool = True) -> None:
        self.routers = find_routers(model) if table is not None else []
        self.table = table
        self.replay = replay
        self.agreement: dict[tuple[str, int], tuple[int, int]] = {}
        self.differs: dict[tuple[str, int], Tensor] = {}
        """Per (pass, layer): ``(tokens,)`` bool, recorded tokens the router chose otherwise."""
        self.full = table
        self._pass = "full"
        self._hooks = ExitStack()

    def same_routing(self) -> Tensor | None:
        """``[T]``: where every row of the batch recorded the same routing (None: no table)."""
        return self.full.same_in_every_row() if self.full is not None else None

    def use(self, name: str, prefix: int) -> None:
        """The forward about to run is pass ``name`` of a shared-prefix forward ("full", or
        "prefix" then "rest" with the first ``prefix`` positions shared)."""
        self._pass = name
        if self.full is not None:
            self.table = self.full if name == "full" else self.full.passes(prefix)[name]

    def __enter__(self) -> RoutingReplay:
        self._hooks.enter_context(hooked(self.routers, self._hook))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._hooks.close()

    def counts(self) -> tuple[int, int]:
        """(agreeing, compared) summed over layers."""
        return (
            sum(a for a, _ in self.agreement.values()),
            sum(n for _, n in self.agreement.values()),
        )

    def differing_tokens(self, name: str = "full") -> Tensor | None:
        """``(tokens,)`` bool: recorded tokens of pass ``name`` whose router chose other
        experts in at least one layer (None before a forward)."""
        masks = [m for (p, _), m in self.differs.items() if p == name]
        return torch.stack(masks).any(0) if masks else None

    def _hook(self, layer: int):  # noqa: ANN202 - torch hook signature
        def hook(module: nn.Module, _inputs: Any, outputs: tuple[Tensor, Tensor, Tensor]) -> Any:
            logits, scores, indices = outputs
            table = self.table
            assert table is not None
            if logits.shape[0] != table.known.shape[0]:
                raise ValueError(
                    f"routing replay: router {layer} saw {logits.shape[0]} tokens but the table "
                    f"holds {table.known.shape[0]}; build the table for this exact batch"
                )
            known = table.known.to(indices.device)
            forced = table.experts[:, layer].to(indices.device)
            same = (indices.sort(-1).values == forced.sort(-1).values).all(-1) & known
            # overwritten, not accumulated: a checkpointing recompute must not count twice
            self.agreement[(self._pass, layer)] = (int(same.sum().item()), int(known.sum().item()))
            self.differs[(self._pass, layer)] = (known & ~same).cpu()
            if not self.replay or not bool(known.any()):
                return None
            probs = torch.softmax(logits.float(), dim=-1).gather(-1, forced)
            if getattr(module, "norm_topk_prob", True):
                probs = probs / probs.sum(-1, keepdim=True)
            keep = known[:, None]
            return (
                logits,
                torch.where(keep, probs.to(scores.dtype), scores),
                torch.where(keep, forced.to(indices.dtype), indices),
            )

        return hook
