"""Find the MoE routers of a model and record the experts each token is routed to.

A router is the ``gate`` of a decoder layer's MoE block (``model.layers.{i}.mlp.gate``); in
transformers 5 it returns ``(router_logits, router_scores, router_indices)`` with one row per
token of the forward pass. Dense models have no routers. Routing replay in training reuses
:func:`find_routers` to hook the same modules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from types import TracebackType
from typing import Any

import torch
from torch import nn

from lego_rl.data import Routing

_ROUTER_NAME = re.compile(r"(?:^|\.)layers\.(\d+)\.mlp\.gate$")


def find_routers(model: nn.Module) -> list[nn.Module]:
    """The MoE routers of ``model`` in layer order; empty for a dense model."""
    found: list[tuple[int, nn.Module]] = []
    for name, module in model.named_modules():
        match = _ROUTER_NAME.search(name)
        if match and hasattr(module, "top_k"):
            found.append((int(match.group(1)), module))
    return [module for _, module in sorted(found, key=lambda item: item[0])]


@contextmanager
def hooked(routers: list[nn.Module], make_hook: Callable[[int], Callable[..., Any]]) -> Iterator[None]:
    """Forward hooks ``make_hook(layer)`` on ``routers`` while the block runs."""
    handles = [router.register_forward_hook(make_hook(layer)) for layer, router in enumerate(routers)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


class RoutingRecorder:
    """Records router indices of every forward pass while active (a context manager).

    Each forward appends, per layer, a ``(tokens, k)`` block; :meth:`pop` returns what was
    recorded since the last pop as a ``(tokens, layers, k)`` tensor. Tokens are flattened over
    the batch in row-major order (batch, then position), as the routers see them.
    """

    def __init__(self, model: nn.Module) -> None:
        self.routers = find_routers(model)
        self._blocks: list[list[torch.Tensor]] = [[] for _ in self.routers]
        self._hooks = ExitStack()

    @property
    def is_moe(self) -> bool:
        return bool(self.routers)

    def __enter__(self) -> RoutingRecorder:
        self._hooks.enter_context(hooked(self.routers, self._hook))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._hooks.close()
        self._blocks = [[] for _ in self.routers]

    def _hook(self, layer: int):  # noqa: ANN202 - torch hook signature
        def record(_module: nn.Module, _inputs: Any, outputs: tuple[torch.Tensor, ...]) -> None:
            self._blocks[layer].append(outputs[2].detach().to("cpu", torch.int32))

        return record

    def pop(self) -> torch.Tensor | None:
        """Indices recorded since the last pop, ``(tokens, layers, k)``; None for a dense model."""
        if not self.routers:
            return None
        per_layer = [torch.cat(blocks) for blocks in self._blocks]
        self._blocks = [[] for _ in self.routers]
        return torch.stack(per_layer, dim=1)


def as_routing(indices: torch.Tensor) -> list[Routing]:
    """A ``(tokens, layers, k)`` tensor as the per-token lists stored in a Generation."""
    return indices.tolist()
