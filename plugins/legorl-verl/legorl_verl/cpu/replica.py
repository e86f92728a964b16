"""verl's rollout replica for the CPU rollout: one :class:`~legorl_verl.cpu.server.CPURolloutServer`
actor per replica, beside the hybrid actor worker it shares weights with."""

from __future__ import annotations

from typing import Any

import ray
from verl.workers.rollout.replica import RolloutReplica

from legorl_verl.cpu import ROLLOUT


def server_name(replica_rank: int) -> str:
    """The Ray actor name of a replica's server (the adapter finds it by this name)."""
    return f"{ROLLOUT}_server_{replica_rank}"


def legorl_block(config: Any) -> dict[str, Any]:
    """The lego-rl part of the rollout config (``rollout.custom.legorl``, set by the plugin)."""
    custom = getattr(config, "custom", None) or {}
    if "legorl" not in custom:
        raise ValueError(
            f"rollout {ROLLOUT} needs actor_rollout_ref.rollout.custom.legorl (the spec): "
            "launch it through `legorl apply` with trainer verl"
        )
    return dict(custom["legorl"])


class CPURolloutReplica(RolloutReplica):
    """A replica whose server samples on the CPU with the embedded inference."""

    async def launch_servers(self) -> None:
        from legorl_verl.cpu.server import CPURolloutServer

        if self.world_size != 1:
            raise ValueError(f"rollout {ROLLOUT} serves one worker per replica (tensor/data/pipeline parallel 1)")
        server = (
            ray.remote(CPURolloutServer)
            .options(name=server_name(self.replica_rank), num_cpus=0, max_concurrency=self.max_concurrency)
            .remote(legorl_block(self.config), str(self.model_config.path), self.replica_rank)
        )
        await server.weights_version.remote()  # built (model loaded) before the first call
        self.servers = [server]
        self._server_handle = server
        self._server_address = server_name(self.replica_rank)
