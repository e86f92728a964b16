"""verl's rollout adapter for the CPU rollout, inside the hybrid actor worker.

verl's ``naive`` checkpoint engine calls ``update_weights`` with the training engine's
per-tensor parameters; they go to the replica's server actor through Ray's object store.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import ray
import torch
from verl.workers.rollout.base import BaseRollout

from legorl_verl.cpu.replica import server_name


class CPURolloutAdapter(BaseRollout):
    """Sends the actor's weights to its replica's server; nothing to resume or release."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1, **_: Any):
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        self.replica_rank = rank if replica_rank == -1 else replica_rank
        self.is_leader_rank = True
        self.sent: list[int] = []

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None

    async def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]], **kwargs: Any) -> None:
        state = {name: tensor.detach().to("cpu", copy=True) for name, tensor in weights}
        version = kwargs.get("global_steps")
        server = ray.get_actor(server_name(self.replica_rank))
        await server.load_weights.remote(state, int(version or 0))
        self.sent.append(int(version or 0))
