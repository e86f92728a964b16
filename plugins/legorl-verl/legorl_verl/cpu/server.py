"""The CPU rollout server: one Ray actor per replica, sampling with the embedded inference.

verl's LLM client calls ``generate`` (token ids in, token ids, log-probs and the routed experts
of the whole sequence out, as verl's vLLM server returns them); the rollout adapter in the
actor worker hands it new weights with ``load_weights`` (verl's ``naive`` checkpoint engine
hand-off). The version of the weights a reply was sampled with is ``global_steps`` in its
``extra_fields``, the field verl's client reads.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from verl.workers.rollout.replica import TokenOutput

from lego_rl.data import Generation, Routing, Sampling
from lego_rl.spec.models import Spec
from legorl_verl.cpu.config import WEIGHTS_FILE


class CPURolloutServer:
    """Samples with an ``hf`` (or ``scripted``) inference built from the spec's inference block."""

    def __init__(self, legorl: dict[str, Any], model_path: str, replica_rank: int):
        self.spec = Spec.model_validate(legorl["spec"])
        self.replica_rank = replica_rank
        self.inference, self.policy = build_inference(self.spec, model_path, Path(legorl["run_dir"]))
        self.log = Path(legorl["run_dir"]) / WEIGHTS_FILE
        self.loads: list[int] = []
        self._record(self.policy.policy_version, "initial")

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> TokenOutput:
        sampling = to_sampling(sampling_params)
        generation = await asyncio.to_thread(self.inference.generate, list(prompt_ids), sampling)
        return TokenOutput(
            token_ids=list(generation.completion_ids),
            log_probs=list(generation.logprobs),
            routed_experts=routing_table(generation, len(prompt_ids)),
            stop_reason="completed",
            extra_fields={"global_steps": generation.policy_version},
        )

    async def load_weights(self, state: dict[str, torch.Tensor], version: int) -> int:
        """Load the trainer's weights (names as the HF model's); returns how many tensors."""
        await asyncio.to_thread(load_state, self.policy, state, version)
        self.loads.append(version)
        self._record(version, "load", tensors=len(state))
        return len(state)

    def _record(self, version: int, event: str, **extra: Any) -> None:
        """One line per weight state: version and a checksum of every tensor (sum of |w|)."""
        sums = {name: float(t.detach().double().abs().sum()) for name, t in self.policy.state_dict().items()}
        self.log.parent.mkdir(parents=True, exist_ok=True)
        line = {"event": event, "replica": self.replica_rank, "version": version, "checksums": sums, **extra}
        with self.log.open("a") as out:
            out.write(json.dumps(line) + "\n")

    def weights_version(self) -> int:
        return int(self.policy.policy_version)

    def load_history(self) -> list[int]:
        """The versions loaded so far, in order (tests read it)."""
        return list(self.loads)

    def parameter(self, name: str) -> torch.Tensor:
        """One weight of the sampling copy (tests compare it with the trainer's)."""
        return self.policy.state_dict()[name].detach().clone()

    # verl's server lifecycle: nothing to free on a CPU
    async def wake_up(self) -> None: ...
    async def sleep(self) -> None: ...
    async def abort_all_requests(self, reject_request: bool = False) -> None: ...
    async def resume_generation(self) -> None: ...
    async def clear_kv_cache(self) -> None: ...
    async def release_kv_cache(self) -> None: ...
    async def resume_kv_cache(self) -> None: ...
    async def start_profile(self, **kwargs: Any) -> None: ...
    async def stop_profile(self) -> None: ...
    async def set_global_steps(self, global_steps: int) -> None: ...


def build_inference(spec: Spec, model_path: str, run_dir: Path) -> tuple[Any, Any]:
    """(the inference that samples, the HFInference whose weights the trainer updates)."""
    try:
        from legorl_embedded.inference.hf import HFInference
        from legorl_embedded.inference.scripted import ScriptedInference
        from legorl_embedded.inference.scripted_options import ScriptedInferenceOptions
        from legorl_embedded.options import HFInferenceOptions
    except ImportError as exc:  # pragma: no cover - the CPU rollout needs the embedded plugin
        raise RuntimeError(
            "the CPU rollout (rollout name legorl-cpu) samples with legorl-embedded: "
            "pip install -e plugins/legorl-embedded"
        ) from exc
    model = spec.model.model_copy(update={"path": model_path})
    plugin, options = spec.inference.plugin, dict(spec.inference.options)
    if plugin == "hf":
        policy = HFInference(model, HFInferenceOptions.model_validate(options), seed=spec.run.seed)
        return policy, policy
    if plugin == "scripted":
        scripted = ScriptedInferenceOptions.model_validate(options)
        policy = HFInference(model, HFInferenceOptions(device=scripted.device), seed=spec.run.seed)
        return ScriptedInference(scripted, policy), policy
    raise ValueError(f"inference.plugin {plugin!r}: the CPU rollout samples with hf or scripted")


def to_sampling(params: dict[str, Any]) -> Sampling:
    """verl's (vLLM-named) sampling parameters as ours."""
    return Sampling(
        temperature=float(params.get("temperature", 1.0)),
        top_p=float(params.get("top_p", 1.0)),
        top_k=int(params.get("top_k", -1)),
        max_tokens=int(params.get("max_tokens", 256)),
        stop_token_ids=list(params.get("stop_token_ids") or []),
        seed=params.get("seed"),
    )


def routing_table(generation: Generation, prompt_len: int) -> np.ndarray | None:
    """``(prompt + completion, layers, k)`` experts; zero rows where a token's are unknown."""
    if generation.routing is None:
        return None
    rows: list[Routing] = list(generation.prompt_routing or [[]] * prompt_len) + list(generation.routing)
    shape = next((np.asarray(r).shape for r in rows if r), None)
    if shape is None:
        return None
    table = np.zeros((len(rows), *shape), dtype=np.int16)
    for i, row in enumerate(rows):
        if row:
            table[i] = np.asarray(row, dtype=np.int16)
    return table


def load_state(policy: Any, state: dict[str, torch.Tensor], version: int) -> None:
    """Load ``state`` into the sampling model; keys it lacks must be tied to ones it has."""
    from legorl_verl.cpu.experts import pack_experts

    state = pack_experts(state)
    model = policy.model
    own = model.state_dict()
    unknown = sorted(set(state) - set(own))
    if unknown:
        raise KeyError(f"trainer sent weights the rollout model does not have: {unknown[:5]}")
    missing = set(own) - set(state)
    tied = {name for name in missing if any(own[name].data_ptr() == own[k].data_ptr() for k in state if k in own)}
    if missing - tied:
        raise KeyError(f"trainer sent no weights for {sorted(missing - tied)[:5]}")
    with policy.batcher.paused():
        model.load_state_dict(state, strict=False)
        policy.policy_version = version
