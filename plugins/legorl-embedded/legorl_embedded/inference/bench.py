"""``legorl bench inference``: generated tokens/s of the ``hf`` backend under concurrent calls.

The quickstart policy (the ``model`` block of ``specs/quickstart.yaml``: a tiny Qwen3-MoE
with the real 151k-token Qwen3 vocabulary) samples from threads that call ``generate()``
at once, as the proxy's request threads do. For each concurrency, every thread makes
``--rounds`` calls one after another; prompts have different lengths (so batched rows are
padded). Prints tokens/s per concurrency and the speed-up over concurrency 1; with
``--max-batch 1`` calls are decoded one at a time (the behaviour before batching).

Options: ``--spec PATH`` ``--concurrency 1,4,8`` ``--rounds N`` ``--tokens N``
``--prompt-tokens N`` ``--threads N`` ``--device cpu|cuda|auto`` ``--dtype float32|bfloat16``
``--max-batch N`` ``--seed N``.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from pathlib import Path
from typing import Any

from lego_rl.data import Sampling
from lego_rl.spec.load import load_spec
from legorl_embedded.inference.hf import HFInference
from legorl_embedded.options import HFInferenceOptions


def parse(args: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="legorl bench inference", description=__doc__)
    p.add_argument("--spec", type=Path, default=Path("specs/quickstart.yaml"), help="its model is used")
    p.add_argument("--concurrency", default="1,4,8", help="comma-separated thread counts")
    p.add_argument("--rounds", type=int, default=2, help="calls per thread, one after another")
    p.add_argument("--tokens", type=int, default=64, help="max_tokens of each call")
    p.add_argument("--prompt-tokens", type=int, default=256, help="longest prompt (shortest: half)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--max-batch", type=int, default=32, help="rows decoded together (1: no batching)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(args)


def run_level(
    backend: HFInference, prompts: list[list[int]], threads: int, sampling: Sampling
) -> dict[str, float]:
    """``threads`` threads share ``prompts`` (each takes the next); generated tokens per second."""
    todo = list(enumerate(prompts))
    lock, tokens = threading.Lock(), [0]
    errors: list[BaseException] = []

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                i, prompt = todo.pop(0)
            try:
                gen = backend.generate(prompt, sampling.model_copy(update={"seed": i}))
            except BaseException as exc:  # noqa: BLE001 - reported after the threads join
                errors.append(exc)
                return
            with lock:
                tokens[0] += len(gen.completion_ids)

    before = dict(backend.batcher.stats)
    started = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    seconds = time.perf_counter() - started
    if errors:
        raise errors[0]
    stats = backend.batcher.stats
    steps = stats["steps"] - before["steps"]
    return {
        "tokens": tokens[0],
        "seconds": seconds,
        "tokens_per_s": tokens[0] / seconds,
        "mean_batch": (stats["row_steps"] - before["row_steps"]) / max(steps, 1),
    }


def main(args: list[str]) -> dict[str, Any]:
    opts = parse(args)
    if not opts.spec.is_file():
        raise SystemExit(f"spec {str(opts.spec)!r} not found: run from the repository root or pass --spec")
    levels = [int(c) for c in opts.concurrency.split(",")]
    spec = load_spec(opts.spec)
    options = HFInferenceOptions(device=opts.device, dtype=opts.dtype, threads=opts.threads)
    backend = HFInference(spec.model, options, seed=opts.seed, max_batch=opts.max_batch)
    rng = random.Random(opts.seed)
    vocab = len(backend.tokenizer) - 300  # ordinary tokens: below the special ones
    low = max(1, opts.prompt_tokens // 2)

    def prompts(n: int) -> list[list[int]]:
        lengths = [rng.randint(low, opts.prompt_tokens) for _ in range(n)]
        return [[rng.randrange(vocab) for _ in range(length)] for length in lengths]

    sampling = Sampling(max_tokens=opts.tokens, temperature=1.0)
    run_level(backend, prompts(2), 2, sampling)  # warm-up: model built, kernels and threads up
    results = {c: run_level(backend, prompts(c * opts.rounds), c, sampling) for c in levels}
    base = results[levels[0]]["tokens_per_s"]
    for c, r in results.items():
        print(
            f"concurrency {c:>3}: {r['tokens']:>6} tokens in {r['seconds']:7.2f} s = "
            f"{r['tokens_per_s']:8.1f} tok/s (x{r['tokens_per_s'] / base:.2f}), "
            f"mean batch {r['mean_batch']:.2f}"
        )
    return {
        "tokens_per_s": {str(c): round(r["tokens_per_s"], 2) for c, r in results.items()},
        "speedup": {str(c): round(r["tokens_per_s"] / base, 3) for c, r in results.items()},
        "mean_batch": {str(c): round(r["mean_batch"], 2) for c, r in results.items()},
        "device": str(backend.device),
        "dtype": opts.dtype,
        "max_batch": opts.max_batch,
        "tokens": opts.tokens,
        "prompt_tokens": opts.prompt_tokens,
    }


if __name__ == "__main__":  # until `legorl bench` lists it: python -m legorl_embedded.inference.bench
    import json
    import sys

    print(json.dumps(main(sys.argv[1:]), sort_keys=True))
