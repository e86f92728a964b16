"""The ``hf`` inference plugin: KV-cached sampling over a transformers model, in process.

Our own decode loop (not ``generate()``) so that every sampled token comes with the log-prob
of the distribution it was actually drawn from and, for MoE models, the experts it was routed
to. Concurrent calls share that loop: :class:`~legorl_embedded.inference.batcher.Batcher` decodes every
request in flight as one batch, each with its own sampling parameters and generator.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from lego_rl.data import Generation, Sampling
from lego_rl.kinds import Problem
from lego_rl.proxy.stopstrings import stop_watch
from lego_rl.registry import BuildContext
from lego_rl.spec.models import ModelSpec
from legorl_embedded.inference.batcher import Batcher, Request
from legorl_embedded.inference.sampling import draw, draw_rows, sampling_logprobs
from legorl_embedded.options import HFInferenceOptions
from legorl_embedded.policy.logprobs import completion_logprobs
from legorl_embedded.policy.model import ARCHITECTURES, build_model
from legorl_embedded.policy.model_spec import TEMPLATE_NAMES, resolve_model_paths
from legorl_embedded.policy.output_vocab import OutputVocab, model_output_vocab
from legorl_embedded.policy.routing import RoutingRecorder
from legorl_embedded.policy.tokenizer import load_tokenizer

__all__ = ["HFInference", "HFInferenceOptions", "draw", "draw_rows", "factory", "sampling_logprobs"]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class HFInference:
    """An in-process policy: tokenizer, model and sampler. Loads lazily on first use."""

    def __init__(
        self,
        model: ModelSpec,
        options: HFInferenceOptions | None = None,
        seed: int = 0,
        max_batch: int | None = None,
    ) -> None:
        """``max_batch``: the most concurrent calls decoded together (default: the option's)."""
        self.spec = model
        self.options = options or HFInferenceOptions()
        self.seed = seed
        self.max_batch = max_batch or self.options.max_batch
        self.policy_version = 0
        self._lock = threading.RLock()
        self._rng_lock = threading.Lock()
        self._model: Any = None
        self._batcher: Batcher | None = None
        self._vocab = OutputVocab(0)
        self._eos = -1
        self._generator = torch.Generator().manual_seed(seed)

    @classmethod
    def from_model(
        cls,
        model: Any,
        *,
        eos: int,
        max_context: int,
        options: HFInferenceOptions | None = None,
        seed: int = 0,
        max_batch: int | None = None,
    ) -> HFInference:
        """A backend over an already-built model (cast to ``options.dtype``), without a
        tokenizer: for benchmarks and tests that bring their own token ids."""
        backend = cls(ModelSpec(name="given", max_context=max_context), options, seed, max_batch)
        backend._vocab, backend._eos = OutputVocab.of(model.config, model.config.vocab_size), eos
        backend._model = model.to(device=backend.device, dtype=DTYPES[backend.options.dtype]).eval()
        return backend

    # ------------------------------------------------------------ lazy state

    @property
    def tokenizer(self) -> Any:
        """The tokenizer with the model's chat template (shared, read-only)."""
        return load_tokenizer(self.spec.tokenizer, self.spec.chat_template)

    @property
    def model(self) -> Any:
        """The sampling model (built or loaded on first access)."""
        with self._lock:
            if self._model is None:
                self._load()
            return self._model

    @property
    def device(self) -> torch.device:
        wanted = self.options.device
        if wanted == "auto":
            wanted = "cuda" if torch.cuda.is_available() else "cpu"
        return torch.device(wanted)

    @property
    def max_context(self) -> int:
        return min(self.spec.max_context, getattr(self.model.config, "max_position_embeddings", 1 << 30))

    def _load(self) -> None:
        if self.options.threads:
            torch.set_num_threads(self.options.threads)
        tokenizer = self.tokenizer
        built = build_model(self.spec, tokenizer, seed=self.seed)
        self._vocab, self._eos = model_output_vocab(built, tokenizer), tokenizer.eos_token_id
        self._model = built.to(device=self.device, dtype=DTYPES[self.options.dtype]).eval()

    @property
    def batcher(self) -> Batcher:
        """The shared decode loop of this model (made on first use)."""
        with self._lock:
            if self._batcher is None:
                model = self.model
                self._batcher = Batcher(
                    model,
                    RoutingRecorder(model),
                    vocab=self._vocab,
                    version=lambda: self.policy_version,
                    rng_lock=self._rng_lock,
                    max_batch=self.max_batch,
                    prefix_cache_mb=self.options.prefix_cache_mb,
                )
            return self._batcher

    # ------------------------------------------------------------ weights

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        """Replace the weights in place (cast to this copy's dtype/device) and set the version.

        Waits for the generations in flight to finish on the old weights; calls arriving
        meanwhile wait and are sampled with the new ones.
        """
        with self.batcher.paused():
            self.model.load_state_dict(state_dict, strict=True)
            self.policy_version = version

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The live weights of the sampling copy (clone before mutating)."""
        return self.model.state_dict()

    def get_rng_state(self) -> torch.Tensor:
        """State of the unseeded sampling generator (saved with a trainer checkpoint)."""
        with self._rng_lock:
            return self._generator.get_state()

    def set_rng_state(self, state: torch.Tensor) -> None:
        with self._rng_lock:
            self._generator.set_state(state)

    def score(self, prompt_ids: Sequence[int], completion_ids: Sequence[int], temperature: float = 1.0) -> list[float]:
        """Log-prob of each of ``completion_ids`` after ``prompt_ids`` (:class:`~lego_rl.kinds.ScoresTokens`):
        one forward pass, between weight loads (a load waits for it, as for a generation)."""
        if not completion_ids:
            return []
        with self.batcher.paused():
            return completion_logprobs(
                self.model, prompt_ids, completion_ids, temperature=temperature or 1.0, vocab=self._vocab,
                device=self.device,
            )

    # ------------------------------------------------------------ sampling

    def generate(
        self,
        prompt_ids: Sequence[int],
        sampling: Sampling,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Generation:
        """Sample one completion of ``prompt_ids``; stops at eos / stop ids / max_tokens / context,
        or at the token that completes one of ``sampling.stop`` (where the proxy cuts a reply).

        Calls from several threads are decoded together in one batch. ``on_token(id,
        logprob)`` is called from this (the calling) thread as each token is drawn, so a
        caller can stream the completion as it grows; if it raises, the generation stops and
        the exception propagates.
        """
        return self.generate_abortable(prompt_ids, sampling, None, on_token)

    def generate_abortable(
        self,
        prompt_ids: Sequence[int],
        sampling: Sampling,
        abort: threading.Event | None,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Generation:
        """:meth:`generate`, ended once ``abort`` is set (:class:`lego_rl.kinds.AbortsGenerations`):
        the batch drops the row at its next step (a request not admitted yet is never prefilled)
        and this returns what it drew, ``finish_reason`` ``abort``."""
        budget = min(sampling.max_tokens, self.max_context - len(prompt_ids))
        if budget <= 0 or not prompt_ids:
            return Generation(
                completion_ids=[], logprobs=[], finish_reason="length", policy_version=self.policy_version
            )
        stops = frozenset({self._eos, *sampling.stop_token_ids})
        request = Request(
            prompt=list(prompt_ids),
            sampling=sampling,
            budget=budget,
            stops=stops,
            generator=self._generator_for(sampling),
            watch=stop_watch(self.tokenizer, sampling.stop, list(stops)) if any(sampling.stop) else None,
            abort=abort,
        )
        self.batcher.submit(request)
        return request.wait(on_token)

    def _generator_for(self, sampling: Sampling) -> torch.Generator:
        if sampling.seed is None:
            return self._generator
        return torch.Generator().manual_seed((self.seed * 1_000_003 + sampling.seed) % (1 << 63))

    # ------------------------------------------------------------ checks

    def preflight(self) -> list[Problem]:
        problems: list[Problem] = []
        if self.options.device == "cuda" and not torch.cuda.is_available():
            problems.append(
                Problem(
                    "inference 'hf' needs a GPU: device is 'cuda' but torch sees none",
                    fix="set inference.options.device to 'cpu' or 'auto', or run where a GPU is visible",
                )
            )
        spec = self.spec
        if spec.path and not (Path(spec.path) / "config.json").is_file():
            problems.append(
                Problem(
                    f"model.path {spec.path!r} is not a local checkpoint directory (no config.json)",
                    fix="point it at a directory written by save_pretrained, or remove it to build from model.config",
                )
            )
        if not spec.path and spec.architecture not in ARCHITECTURES:
            problems.append(
                Problem(
                    f"model.architecture {spec.architecture!r} cannot be built from config",
                    fix=f"use one of {', '.join(ARCHITECTURES)} or set model.path to a checkpoint",
                )
            )
        if spec.tokenizer != "qwen3" and not Path(spec.tokenizer).is_dir():
            problems.append(
                Problem(
                    f"model.tokenizer {spec.tokenizer!r} is neither 'qwen3' nor a local directory",
                    fix="set it to 'qwen3' or to a directory holding tokenizer.json",
                )
            )
        if spec.chat_template not in TEMPLATE_NAMES and not Path(spec.chat_template).is_file():
            problems.append(
                Problem(
                    f"model.chat_template {spec.chat_template!r} is not a known template or a file",
                    fix="use 'qwen3', 'native' (the tokenizer's own) or a path to a Jinja file",
                )
            )
        return problems


# ---------------------------------------------------------------- registration


def factory(options: HFInferenceOptions, ctx: BuildContext) -> HFInference:
    if ctx.spec is None:
        raise ValueError("inference 'hf' needs the spec's `model` block; build it from a spec")
    return HFInference(resolve_model_paths(ctx.spec.model, ctx), options, seed=ctx.spec.run.seed)
