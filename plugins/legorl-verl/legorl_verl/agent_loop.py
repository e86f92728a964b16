"""The verl agent loop ``legorl``: one lego-rl trial per sample, returned as verl's
AgentLoopOutput built from the recorded tokens (see :mod:`legorl_verl.output`).

verl instantiates it per sample with ``hydra.utils.instantiate`` (our entry in
``agent_loops.yaml``, loaded by every AgentLoopWorker, plus ``register`` for this process).
Each dataset row names its task in ``extra_info.task`` (written by the trainer plugin).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)

from lego_rl.data import Attribution, TrialResult
from legorl_verl.config import AGENT_NAME
from legorl_verl.output import routing_shape, to_samples
from legorl_verl.trials import TrialKit, kit_for

_executor: ThreadPoolExecutor | None = None
_record_lock = threading.Lock()
SAMPLES_FILE = "verl/samples.jsonl"
"""Under the run directory: the trial behind each verl sample (see ``LegoRLAgentLoop._record``)."""


def _threads(concurrency: int) -> ThreadPoolExecutor:
    """Trials block on their harness: run them on threads, as many as run.concurrency."""
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(concurrency, thread_name_prefix="legorl-trial")
    return _executor


@register(AGENT_NAME)
class LegoRLAgentLoop(AgentLoopBase):
    """Runs the sample's task as one lego-rl trial through verl's rollout servers."""

    def __init__(self, trainer_config: Any, server_manager: Any, tokenizer: Any, *, kit: TrialKit | None = None, **kwargs: Any):
        # verl's base constructor prepares chat-template token builders that this loop never
        # uses (the proxy renders); only the parts the loop needs are kept.
        self.config = trainer_config.config
        self.rollout_config = self.config.actor_rollout_ref.rollout
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        legorl = OmegaConf.to_container(self.config.legorl, resolve=True)
        assert isinstance(legorl, dict)
        self.kit = kit or kit_for(legorl)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput | list[AgentLoopOutput]:
        import asyncio

        extra = kwargs.get("extra_info") or {}
        task = str(extra["task"])
        trial_id = f"{task}-{uuid.uuid4().hex[:10]}"
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        result, failed = await loop.run_in_executor(
            _threads(self.kit.spec.run.concurrency),
            self.kit.run,
            task,
            trial_id,
            self.server_manager,
            loop,
            self.tokenizer,
        )
        out = self.output(result, time.monotonic() - started, failed, step=kwargs.get("global_steps"))
        self._record(out if isinstance(out, list) else [out], kwargs)
        return out

    def _record(self, outputs: list[AgentLoopOutput], kwargs: dict[str, Any]) -> None:
        """One line per output in ``<run>/verl/samples.jsonl``: the trial behind each of verl's
        samples, under verl's own key (``{uid}_{session}_{index}``, as its v1 rollout dump names
        them), beside what verl keeps (its batch does not dump the trial's fields)."""
        uid, session = kwargs.get("uid"), kwargs.get("session_id")
        lines = [
            json.dumps(
                {
                    "key": f"{uid}_{session}_{index}" if uid is not None and session is not None else None,
                    "step": kwargs.get("global_steps"),
                    "segment": index,
                    **out.extra_fields["reward_extra_info"],
                },
                default=str,
            )
            for index, out in enumerate(outputs)
        ]
        path = Path(self.config.legorl.run_dir) / SAMPLES_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        with _record_lock, path.open("a") as f:
            f.write("".join(line + "\n" for line in lines))

    def output(
        self, result: TrialResult, seconds: float, failed: list[TrialResult] | None = None, step: Any = None
    ) -> AgentLoopOutput | list[AgentLoopOutput]:
        """verl's output of a finished trial (with ``segments: all``, one per segment, in
        order: verl's v1 list of outputs); ``failed``: its attempts that failed through the
        infrastructure (retried); ``step``: verl's step of the sample, the weights' version
        when the trial made no call."""
        versions = [version for version, _ in result.call_versions] or [int(step or 0)]
        rollout = self.rollout_config
        replay = bool(rollout.enable_rollout_routing_replay)
        shape = routing_shape(result.trajectory) if replay else None
        if replay and shape is None:
            shape = _model_routing_shape(self.config)
        pad = getattr(self.tokenizer, "pad_token_id", None)
        choose = self.config.legorl.get("segments", "last")
        samples = to_samples(
            result.trajectory,
            prompt_length=int(rollout.prompt_length),
            response_length=int(rollout.response_length),
            pad_id=pad if isinstance(pad, int) else 0,
            routing_shape=shape,
            choose=choose,
            train=result.attribution != Attribution.INFRASTRUCTURE,
        )
        outputs = [
            AgentLoopOutput(
                prompt_ids=sample.prompt_ids,
                response_ids=sample.response_ids,
                response_mask=sample.response_mask,
                response_logprobs=sample.response_logprobs,
                routed_experts=sample.routed_experts,
                reward_score=float(result.reward),
                num_turns=result.calls,
                metrics=AgentLoopMetrics(generate_sequences=seconds),
                extra_fields={
                    "legorl_trial": result.trial_id,
                    "legorl_termination": result.termination.value,
                    "legorl_segment": index,
                    # the weights' versions the trial sampled with (verl v1's staleness control)
                    "min_global_steps": min(versions),
                    "max_global_steps": max(versions),
                    **{f"legorl_{k}": v for k, v in sample.stats.items()},
                    # verl carries these into its batch and its rollout dump (trainer.rollout_data_dir)
                    "reward_extra_info": trial_info(result, sample.stats, failed or []),
                },
            )
            for index, sample in enumerate(samples)
        ]
        return outputs if choose == "all" else outputs[0]


def trial_info(result: TrialResult, stats: dict[str, int], failed: list[TrialResult]) -> dict[str, Any]:
    """What verl's batch keeps of a trial, beside its reward (one value per key, every sample)."""
    return {
        "legorl_trial": result.trial_id,
        "legorl_task": result.task,
        "legorl_termination": result.termination.value,
        "legorl_attribution": result.attribution.value,
        "legorl_reward": float(result.reward),
        "legorl_calls": int(result.calls),
        "legorl_versions": ",".join(str(version) for version, _ in result.call_versions),
        "legorl_retried": " | ".join(f"{r.termination.value}: {r.reason[-400:]}" for r in failed),
        "legorl_trained_tokens": int(stats.get("trained_tokens", 0)),
        "legorl_segments": int(stats.get("segments", 0)),
        "legorl_untrained_tokens": int(stats.get("untrained_tokens", 0)),
    }


def _model_routing_shape(config: Any) -> tuple[int, int]:
    """(MoE layers, experts per token) of the policy, for a trial without recorded routing."""
    from transformers import AutoConfig

    model = config.actor_rollout_ref.model
    hf = AutoConfig.from_pretrained(model.hf_config_path or model.path, trust_remote_code=model.trust_remote_code)
    text = getattr(hf, "text_config", hf)
    return int(text.num_hidden_layers), int(text.num_experts_per_tok)
