"""The ``hf`` inference plugin: KV-cached sampling over a transformers model, in process.

Our own decode loop (not ``generate()``) so that every sampled token comes with the log-prob
of the distribution it was actually drawn from and, for MoE models, the experts it was routed
to. Calls are serialised by a lock; :func:`sampling_logprobs` and :func:`draw` work on a batch
of rows so that batching concurrent requests can be added around them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from lego_rl.data import Generation, Sampling
from lego_rl.kinds import Problem
from lego_rl.registry import BuildContext
from lego_rl.spec.models import ModelSpec
from legorl_embedded.model import ARCHITECTURES, build_model, mask_unused_vocab
from legorl_embedded.model_spec import TEMPLATE_NAMES, resolve_model_paths
from legorl_embedded.options import HFInferenceOptions
from legorl_embedded.routing import RoutingRecorder, as_routing
from legorl_embedded.tokenizer import load_tokenizer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class HFInference:
    """An in-process policy: tokenizer, model and sampler. Loads lazily on first use."""

    def __init__(self, model: ModelSpec, options: HFInferenceOptions | None = None, seed: int = 0) -> None:
        self.spec = model
        self.options = options or HFInferenceOptions()
        self.seed = seed
        self.policy_version = 0
        self._lock = threading.RLock()
        self._model: Any = None
        self._recorder: RoutingRecorder | None = None
        self._vocab = 0
        self._eos = -1
        self._generator = torch.Generator().manual_seed(seed)

    @classmethod
    def from_model(
        cls, model: Any, *, eos: int, max_context: int, options: HFInferenceOptions | None = None, seed: int = 0
    ) -> HFInference:
        """A backend over an already-built model (cast to ``options.dtype``), without a
        tokenizer: for benchmarks and tests that bring their own token ids."""
        backend = cls(ModelSpec(name="given", max_context=max_context), options, seed)
        backend._vocab, backend._eos = model.config.vocab_size, eos
        backend._model = model.to(device=backend.device, dtype=DTYPES[backend.options.dtype]).eval()
        backend._recorder = RoutingRecorder(backend._model)
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
        self._vocab, self._eos = len(tokenizer), tokenizer.eos_token_id  # len() is slow: once
        built = build_model(self.spec, tokenizer, seed=self.seed)
        self._model = built.to(device=self.device, dtype=DTYPES[self.options.dtype]).eval()
        self._recorder = RoutingRecorder(self._model)

    # ------------------------------------------------------------ weights

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        """Replace the weights in place (cast to this copy's dtype/device) and set the version."""
        with self._lock:
            self.model.load_state_dict(state_dict, strict=True)
            self.policy_version = version

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The live weights of the sampling copy (clone before mutating)."""
        with self._lock:
            return self.model.state_dict()

    def get_rng_state(self) -> torch.Tensor:
        """State of the unseeded sampling generator (saved with a trainer checkpoint)."""
        return self._generator.get_state()

    def set_rng_state(self, state: torch.Tensor) -> None:
        self._generator.set_state(state)

    # ------------------------------------------------------------ sampling

    def generate(
        self,
        prompt_ids: list[int],
        sampling: Sampling,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Generation:
        """Sample one completion of ``prompt_ids``; stops at eos / stop ids / max_tokens / context.

        ``on_token(id, logprob)`` is called from this thread right after each token is drawn
        (before the next forward), so a caller can stream the completion as it grows.
        """
        with self._lock:
            model = self.model
            budget = min(sampling.max_tokens, self.max_context - len(prompt_ids))
            if budget <= 0 or not prompt_ids:
                return Generation(
                    completion_ids=[], logprobs=[], finish_reason="length", policy_version=self.policy_version
                )
            generator = self._generator_for(sampling)
            stops = {self._eos, *sampling.stop_token_ids}
            with torch.inference_mode(), self._recorder as recorder:
                return self._decode(
                    model, recorder, prompt_ids, sampling, budget, stops, generator, on_token
                )

    def _decode(
        self,
        model: Any,
        recorder: RoutingRecorder,
        prompt_ids: list[int],
        sampling: Sampling,
        budget: int,
        stops: set[int],
        generator: torch.Generator,
        on_token: Callable[[int, float], None] | None,
    ) -> Generation:
        out = model(input_ids=self._ids([prompt_ids]), use_cache=True, logits_to_keep=1)
        prompt_routing = recorder.pop()
        completion: list[int] = []
        logprobs: list[float] = []
        routing: list[torch.Tensor] = []
        finish = "length"
        for step in range(budget):
            logits = mask_unused_vocab(out.logits[:, -1].float().cpu(), self._vocab)
            token, logprob = draw(logits, sampling, generator)
            completion.append(int(token[0]))
            logprobs.append(float(logprob[0]))
            if on_token is not None:
                on_token(completion[-1], logprobs[-1])
            feed = {"input_ids": self._ids([[completion[-1]]]), "past_key_values": out.past_key_values}
            if completion[-1] in stops or step == budget - 1:
                finish = "stop" if completion[-1] in stops else "length"
                if recorder.is_moe:  # the last token's routing: run the layers, skip the LM head
                    model.base_model(**feed, use_cache=True)
                    routing.append(recorder.pop())
                break
            out = model(**feed, use_cache=True)
            if recorder.is_moe:
                routing.append(recorder.pop())
        return Generation(
            completion_ids=completion,
            logprobs=logprobs,
            routing=as_routing(torch.cat(routing)) if routing else None,
            prompt_routing=as_routing(prompt_routing) if prompt_routing is not None else None,
            finish_reason=finish,
            policy_version=self.policy_version,
        )

    def _ids(self, rows: list[list[int]]) -> torch.Tensor:
        return torch.tensor(rows, dtype=torch.long, device=self.device)

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


# ---------------------------------------------------------------- sampling math (batched)


def sampling_logprobs(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """Log-probs ``(rows, vocab)`` of the distribution sampled from: temperature, top-k, top-p.

    Excluded ids get -inf. Temperature 0 is greedy and is handled by :func:`draw`.
    """
    scaled = logits.float() / max(sampling.temperature, 1e-6)
    if 0 < sampling.top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, sampling.top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if sampling.top_p < 1.0:
        ordered, order = torch.sort(scaled, dim=-1, descending=True)
        probs = torch.softmax(ordered, dim=-1)
        before = torch.cumsum(probs, dim=-1) - probs  # mass strictly above each id
        drop = before >= sampling.top_p
        drop[..., 0] = False
        scaled = scaled.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))
    return torch.log_softmax(scaled, dim=-1)


def draw(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row and its log-prob under the distribution it was drawn from."""
    if sampling.temperature == 0:
        return logits.argmax(dim=-1), torch.zeros(logits.shape[0])
    logprobs = sampling_logprobs(logits, sampling)
    # Inverse-CDF sampling: several times faster than torch.multinomial over a 151k vocabulary.
    cdf = logprobs.exp().cumsum(dim=-1)
    u = torch.rand(logits.shape[0], 1, generator=generator) * cdf[:, -1:]
    tokens = torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp_max(logits.shape[-1] - 1)
    return tokens, logprobs.gather(-1, tokens[:, None]).squeeze(-1)


# ---------------------------------------------------------------- registration


def factory(options: HFInferenceOptions, ctx: BuildContext) -> HFInference:
    if ctx.spec is None:
        raise ValueError("inference 'hf' needs the spec's `model` block; build it from a spec")
    return HFInference(resolve_model_paths(ctx.spec.model, ctx), options, seed=ctx.spec.run.seed)
