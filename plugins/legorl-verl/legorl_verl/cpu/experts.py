"""verl hands weights over in vLLM's checkpoint names: a transformers 5 packed MoE tensor
(``mlp.experts.gate_up_proj`` ``[E, 2I, H]``, ``mlp.experts.down_proj`` ``[E, H, I]``) as
per-expert ``experts.{e}.gate_proj/up_proj/down_proj.weight``. This packs them back."""

from __future__ import annotations

import re

import torch

_EXPERT = re.compile(r"^(?P<base>.+\.mlp\.experts)\.(?P<e>\d+)\.(?P<proj>gate_proj|up_proj|down_proj)\.weight$")


def pack_experts(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` with per-expert tensors packed into the model's 3D expert parameters."""
    packed: dict[str, torch.Tensor] = {}
    experts: dict[str, dict[str, dict[int, torch.Tensor]]] = {}
    for name, tensor in state.items():
        match = _EXPERT.match(name)
        if match is None:
            packed[name] = tensor
            continue
        experts.setdefault(match["base"], {}).setdefault(match["proj"], {})[int(match["e"])] = tensor
    for base, projections in experts.items():
        count = len(projections.get("down_proj", {}))
        if any(sorted(p) != list(range(count)) for p in projections.values()) or len(projections) != 3:
            raise ValueError(f"{base}: per-expert weights incomplete ({ {k: sorted(v) for k, v in projections.items()} })")
        gate, up, down = (projections[k] for k in ("gate_proj", "up_proj", "down_proj"))
        packed[f"{base}.gate_up_proj"] = torch.stack([torch.cat([gate[e], up[e]], dim=0) for e in range(count)])
        packed[f"{base}.down_proj"] = torch.stack([down[e] for e in range(count)])
    return packed
