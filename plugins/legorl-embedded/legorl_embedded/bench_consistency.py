"""``legorl bench consistency``: does routing replay make training score what inference sampled?

1. A tiny Qwen3-MoE over bytes (vocabulary 256) is first trained briefly on Python sources
   of the standard library, so its routers have learnt something (an untrained router's
   choices are near ties and the effect is far smaller).
2. The ``hf`` backend samples completions of source snippets from a bfloat16 copy, recording
   sampled log-probs and the experts of every prompt and completion token.
3. The trainer's own scoring path (fp32, :class:`~legorl_embedded.trainer.Scoring`) scores the
   same tokens with routing replay off and on; :class:`~legorl_embedded.consistency.Consistency`
   compares each with the sampled log-probs.

Targets: ``pearson_replay >= 0.9993`` and ``k3_reduction >= 3``. Options: ``--train-steps N``
``--samples N`` ``--tokens N`` ``--threads N`` ``--seed N``.
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import time
from pathlib import Path
from typing import Any

import torch

from lego_rl.data import Sampling, Segment, Trajectory, TrialResult
from legorl_embedded.adamw import adamw
from legorl_embedded.batch import build_rows
from legorl_embedded.consistency import Consistency
from legorl_embedded.inference import HFInference
from legorl_embedded.options import HFInferenceOptions
from legorl_embedded.routing import find_routers
from legorl_embedded.trainer import Scoring

CONFIG: dict[str, Any] = {
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "norm_topk_prob": True,
    "max_position_embeddings": 512,
    "experts_implementation": "eager",
}
EOS = 0  # a NUL byte: never in the text, so sampling runs to max_tokens
TARGETS = {"pearson_replay": 0.9993, "k3_reduction": 3.0}


def corpus(limit: int = 2_000_000) -> bytes:
    """Python sources of the standard library (always installed), as bytes, in a fixed order."""
    root = Path(os.__file__).parent
    out = bytearray()
    for path in sorted(root.glob("*.py")):
        out += path.read_bytes().replace(b"\0", b"") + b"\n"
        if len(out) >= limit:
            break
    return bytes(out)


def train(model: Any, text: bytes, steps: int, rng: random.Random) -> float:
    """Next-byte prediction with AdamW; returns the last loss."""
    opt = adamw(model.parameters(), 3e-3)
    model.train()
    loss = torch.tensor(0.0)
    for _ in range(steps):
        starts = [rng.randrange(len(text) - 129) for _ in range(16)]
        ids = torch.tensor([list(text[s : s + 128]) for s in starts])
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return float(loss.detach())


def sample(backend: HFInference, text: bytes, n: int, tokens: int, rng: random.Random) -> list[Segment]:
    """``n`` sampled completions of 48-byte snippets, as recorded segments."""
    segments = []
    for i in range(n):
        start = rng.randrange(len(text) - 49)
        prompt = list(text[start : start + 48])
        gen = backend.generate(prompt, Sampling(max_tokens=tokens, seed=i))
        assert gen.routing is not None and gen.prompt_routing is not None
        segments.append(
            Segment(
                ids=prompt + gen.completion_ids,
                loss_mask=[0] * len(prompt) + [1] * len(gen.completion_ids),
                logprobs=[0.0] * len(prompt) + gen.logprobs,
                routing=[*gen.prompt_routing, *gen.routing],
            )
        )
    return segments


def score(model: Any, segments: list[Segment], replay: bool) -> dict[str, float]:
    """The trainer's fp32 scoring of the sampled tokens, compared with the sampled log-probs."""
    routers = find_routers(model)
    scoring = Scoring(
        temperature=1.0,
        vocab=CONFIG["vocab_size"],
        reference=None,
        device=torch.device("cpu"),
        replay=replay,
        routing_shape=(len(routers), int(routers[0].top_k)),
    )
    trials = [
        TrialResult(trial_id=str(i), task="bench", trajectory=Trajectory(session=str(i), segments=[s]))
        for i, s in enumerate(segments)
    ]
    rows = build_rows([trials], [[0.0] * len(trials)])
    stats = Consistency()
    with torch.no_grad():
        for micro in rows.micro_batches(4096):
            with scoring.routing(model, micro) as routing:
                logp = scoring.logprobs(model, micro.ids, micro.attention_mask, micro.mask)
            stats.add(logp, micro.logprobs, micro.mask)
            recorded = routing.table.recorded if routing.table is not None else 0
            stats.add_routing(*routing.counts(), recorded, int(micro.attention_mask.sum()))
    return stats.metrics()


def main(args: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="legorl bench consistency")
    parser.add_argument("--train-steps", type=int, default=300)
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    opts = parser.parse_args(args)
    torch.set_num_threads(opts.threads)
    torch.manual_seed(opts.seed)
    rng = random.Random(opts.seed)
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    started = time.perf_counter()
    text = corpus()
    model = Qwen3MoeForCausalLM(Qwen3MoeConfig(**CONFIG)).float()
    train_loss = train(model, text, opts.train_steps, rng)
    trained = time.perf_counter()
    backend = HFInference.from_model(
        copy.deepcopy(model),
        eos=EOS,
        max_context=CONFIG["max_position_embeddings"],
        options=HFInferenceOptions(dtype="bfloat16", device="cpu"),
        seed=opts.seed,
    )
    segments = sample(backend, text, opts.samples, opts.tokens, rng)
    sampled = time.perf_counter()
    off, on = score(model, segments, replay=False), score(model, segments, replay=True)
    k3_reduction = off["k3_kl"] / max(on["k3_kl"], 1e-12)
    figures = {
        "pearson_off": off["prob_pearson"],
        "pearson_replay": on["prob_pearson"],
        "k3_off": off["k3_kl"],
        "k3_replay": on["k3_kl"],
        "k3_reduction": k3_reduction,
        "routing_agreement": off["routing_agreement"],
        "logp_diff_max_off": off["logp_diff_max"],
        "logp_diff_max_replay": on["logp_diff_max"],
        "ratio_outside_off": off["ratio_outside"],
        "ratio_outside_replay": on["ratio_outside"],
        "train_loss": train_loss,
        "scored_tokens": sum(s.trained_tokens for s in segments),
        "train_seconds": trained - started,
        "sample_seconds": sampled - trained,
        "seconds": time.perf_counter() - started,
    }
    figures["targets_met"] = (
        figures["pearson_replay"] >= TARGETS["pearson_replay"]
        and k3_reduction >= TARGETS["k3_reduction"]
    )
    for key, value in figures.items():
        print(f"{key:>22}: {value:.6g}" if isinstance(value, float) else f"{key:>22}: {value}")
    return figures
