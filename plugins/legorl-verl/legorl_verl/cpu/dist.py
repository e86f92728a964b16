"""``actor_rollout_ref.model.external_lib``: the gloo process group of a CPU worker.

verl imports the model's external library when it reads the model config, before it starts
its own process group; its default backend string for a CPU platform, ``cpu:gloo,cpu:gloo``,
is one torch refuses, so the group is started here first (rank and world from Ray's worker env).
"""

from __future__ import annotations

import os

import torch.distributed as dist


def init_gloo() -> None:
    if dist.is_initialized() or "RANK" not in os.environ or "MASTER_ADDR" not in os.environ:
        return
    dist.init_process_group(
        backend="gloo", rank=int(os.environ["RANK"]), world_size=int(os.environ.get("WORLD_SIZE", "1"))
    )


init_gloo()
