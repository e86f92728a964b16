"""Weight updates as the pool sees them: the trainer's ``load_weights`` passes a gate.

The trainer hands new weights to ``ctx.inference.load_weights(state, version)``. Without
partial rollouts the gate first lets the trials in flight finish on the old weights (so no
trajectory mixes versions); with them the update goes straight through. Either way the pool
then admits the work the new version allows. Everything else reaches the backend unchanged.
"""

from __future__ import annotations

from typing import Any

from lego_rl.engine.pool import RolloutPool
from lego_rl.kinds import LoadsWeights
from lego_rl.wrapping import expose


class WeightGate:
    """The inference backend as the trainer sees it: same attributes and capabilities
    (:func:`~lego_rl.wrapping.expose`), gated ``load_weights``."""

    def __init__(self, inference: Any, pool: RolloutPool):
        self._inner, self._pool = inference, pool
        expose(self, inference)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def load_weights(self, state: Any, version: int) -> None:
        if not self._pool.config.partial_rollouts:
            self._pool.drain()
        try:
            self._inner.load_weights(state, version=version)
        finally:
            self._pool.updated()


def gated(inference: Any, pool: RolloutPool) -> Any:
    """``inference`` behind a :class:`WeightGate` when it accepts weights, else unchanged."""
    return WeightGate(inference, pool) if isinstance(inference, LoadsWeights) else inference
