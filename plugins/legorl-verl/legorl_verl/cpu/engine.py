"""verl's FSDP engine on the CPU, replaying the routing recorded at sampling (verl's R3).

verl 0.9.1 replays rollout routing on its megatron and veomni engines only, neither of which
runs on a CPU. This engine is verl's own FSDP one (registered through ``EngineRegistry`` for
the cpu device) with one addition: when its config's ``router_replay.mode`` (a field of verl's
``EngineConfig``) is ``R3``, every forward of a micro-batch that carries ``routed_experts``
(verl's batch field, filled by the agent loop from the rollout server's record) routes each
recorded token to its recorded experts, through legorl-embedded's replay hooks on the routers,
kept open over the backward so a recompute routes the same way. Log-prob recomputation and the
update both replay. Tokens without a record (all-zero rows) route natively. Each training
micro-batch reports ``actor/routing_replayed`` (share of its tokens with a record) and
``actor/routing_agreement`` (share of those whose own router chose the same experts).
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import torch
from legorl_embedded.policy.replay import RoutingReplay, RoutingTable
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

REPLAY_MODE = "R3"


def routing_table(micro_batch: Any) -> RoutingTable | None:
    """The recorded experts of a verl micro-batch (nested ``[b, j, layers, k]``), right-padded
    as verl's engine pads ``input_ids`` without padding removal; None without a record."""
    routed = micro_batch.get("routed_experts", None)
    if routed is None:
        return None
    lengths = micro_batch["input_ids"].offsets().diff().tolist()
    rows = routed.unbind() if routed.is_nested else list(routed)
    width = max(lengths)
    layers, k = rows[0].shape[-2:]
    experts = torch.zeros(len(rows), width, layers, k, dtype=torch.long)
    for row, (record, length) in enumerate(zip(rows, lengths, strict=True)):
        experts[row, :length] = record[:length].long()
    known = experts.flatten(2).ne(0).any(-1)  # k >= 2 distinct experts: a record is never all zeros
    return RoutingTable(experts.flatten(0, 1), known.flatten(), width)


class ReplayingFSDPEngine(FSDPEngineWithLMHead):
    """verl's FSDP engine whose forwards follow the recorded routing (R3)."""

    _replay: RoutingReplay | None = None

    @property
    def replays(self) -> bool:
        return getattr(self.engine_config.router_replay, "mode", "disabled") == REPLAY_MODE

    def forward_backward_batch(self, data: Any, loss_function: Any, forward_only: bool = False) -> Any:
        if not self.replays or data.get("routed_experts", None) is None:
            return super().forward_backward_batch(data, loss_function, forward_only)
        with ExitStack() as stack:  # the hooks stay for every micro-batch's forward and backward
            self._replay = stack.enter_context(RoutingReplay(self.module, _EMPTY))
            try:
                return super().forward_backward_batch(data, loss_function, forward_only)
            finally:
                self._replay = None

    def forward_step(self, micro_batch: Any, loss_function: Any, forward_only: bool) -> Any:
        replay = self._replay
        if replay is None:
            return super().forward_step(micro_batch, loss_function, forward_only)
        table = routing_table(micro_batch)
        replay.table = table
        replay.full = table
        replay.agreement.clear()
        loss, output = super().forward_step(micro_batch, loss_function, forward_only)
        agreeing, compared = replay.counts()
        if table is not None and compared and not forward_only:
            tokens = int(micro_batch["input_ids"].offsets()[-1])
            metrics = output.setdefault("metrics", {})
            metrics["actor/routing_replayed"] = table.recorded / max(1, tokens)
            metrics["actor/routing_agreement"] = agreeing / compared
        return loss, output


_EMPTY = RoutingTable(torch.zeros(0, 1, 1, dtype=torch.long), torch.zeros(0, dtype=torch.bool))
"""Until the first micro-batch sets its own: the replay finds the routers with a table."""
