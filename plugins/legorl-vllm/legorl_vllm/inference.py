"""The ``vllm`` inference plugin: the policy sampled by a vLLM server over HTTP.

Token ids in, token ids + the log-prob each was sampled with (``--logprobs-mode
processed_logprobs``: after temperature, top-k and top-p) + the experts every token was routed
to out. vLLM returns routing only in non-streaming responses and never for the last sampled
token (it has not been forwarded), so with routing replay each generation is followed by one
prefill of prompt + completion (prefix-cached) whose routed experts cover every position; the
generation itself can still stream. See :mod:`legorl_vllm.client` for the API version targeted.

The server is attached (``options.url``) or launched on first use (``vllm serve``) and stopped
by :meth:`VLLMInference.close`. Weight updates: :mod:`legorl_vllm.weights`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lego_rl.data import Generation, Sampling
from lego_rl.kinds import Problem
from lego_rl.registry import BuildContext
from lego_rl.spec.models import ModelSpec
from legorl_vllm.client import CompletionClient, VLLMError
from legorl_vllm.options import VLLMOptions
from legorl_vllm.server import LaunchedServer, LaunchPlan, missing_executable
from legorl_vllm.weights import (
    InFlight,
    is_staged,
    reload_from_disk,
    stage_model_dir,
    write_weights,
)


class VLLMInference:
    """The policy behind a vLLM server; thread-safe, starts its server lazily."""

    def __init__(
        self,
        model: ModelSpec,
        options: VLLMOptions | None = None,
        *,
        run_dir: Path | None = None,
        weights_dir: Path | None = None,
        seed: int = 0,
    ) -> None:
        """``model``: the spec's model block with local paths resolved; ``weights_dir``: the
        resolved ``options.weights_dir`` (default ``<run_dir>/vllm-weights`` when launching)."""
        self.spec = model
        self.options = options or VLLMOptions()
        self.seed = seed
        self.run_dir = run_dir
        self.served_name = self.options.served_model_name or model.name
        self.weights_dir = weights_dir
        self.policy_version = 0
        self._lock = threading.Lock()
        self._client: CompletionClient | None = None
        self._server: LaunchedServer | None = None
        self._inflight = InFlight()

    # ------------------------------------------------------------ lazy state

    @property
    def tokenizer(self) -> Any:
        """The tokenizer with the model's chat template (shared, read-only)."""
        from legorl_embedded.policy.tokenizer import load_tokenizer

        return load_tokenizer(self.spec.tokenizer, self.spec.chat_template)

    @property
    def client(self) -> CompletionClient:
        """The HTTP client of the server (attached, or launched now)."""
        with self._lock:
            if self._client is None:
                self._client = self._connect()
            return self._client

    @property
    def url(self) -> str:
        return self.client.base_url

    def _connect(self) -> CompletionClient:
        options = self.options
        url = options.url
        if url is None:
            log = (
                Path(options.log_file)
                if options.log_file
                else self._work_dir() / "vllm-server.log"
            )
            self._server = LaunchedServer(options, self._launch_plan(), log)
            self._server.start()
            url = self._server.url
        return CompletionClient(
            url,
            self.served_name,
            api_key=options.api_key,
            request_timeout_s=options.request_timeout_s,
            connect_timeout_s=options.connect_timeout_s,
        )

    def _work_dir(self) -> Path:
        if self.run_dir is None:
            self.run_dir = Path(tempfile.mkdtemp(prefix="legorl-vllm-"))
        return self.run_dir

    def _launch_plan(self) -> LaunchPlan:
        source = self._model_source()
        served = source
        if self.options.weight_sync == "reload":
            target = self.weights_dir or self._work_dir() / "vllm-weights"
            self.weights_dir = stage_model_dir(Path(source), target)
            served = str(self.weights_dir)
        tokenizer = self.spec.tokenizer if Path(self.spec.tokenizer).is_dir() else None
        return LaunchPlan(
            model=served,
            served_name=self.served_name,
            # +1: the routing prefill of a generation that filled the context forwards one more token.
            max_model_len=self.spec.max_context + 1,
            dtype=self.spec.dtype,
            seed=self.seed,
            dev_mode=self.options.weight_sync == "reload",
            tokenizer=tokenizer,
        )

    def _model_source(self) -> str:
        """What to serve: model.path, or a checkpoint built from model.config (tiny models)."""
        if self.spec.path:
            return self.spec.path
        target = self._work_dir() / "vllm-base"
        if not (target / "config.json").is_file():
            from legorl_embedded.policy.model import build_model, save_checkpoint

            save_checkpoint(
                build_model(self.spec, self.tokenizer, seed=self.seed),
                self.tokenizer,
                target,
            )
        return str(target)

    # ------------------------------------------------------------ sampling

    def generate(
        self,
        prompt_ids: Sequence[int],
        sampling: Sampling,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Generation:
        """Sample one completion of ``prompt_ids``. With ``options.stream``, ``on_token(id,
        logprob)`` runs (in this thread) as each token arrives; otherwise after the reply."""
        if not prompt_ids or sampling.max_tokens <= 0:
            return Generation(
                completion_ids=[],
                logprobs=[],
                finish_reason="length",
                policy_version=self.policy_version,
            )
        client = self.client
        with self._inflight.generation():
            version = self.policy_version
            out = client.complete(
                list(prompt_ids),
                sampling,
                stream=self.options.stream,
                on_token=on_token,
            )
            if out.finish_reason not in ("stop", "length"):
                raise VLLMError(
                    f"vLLM ended the generation with finish_reason {out.finish_reason!r}"
                )
            routing, prompt_routing = self._routing(
                client, list(prompt_ids), out.token_ids
            )
        return Generation(
            completion_ids=out.token_ids,
            logprobs=out.logprobs,
            routing=routing,
            prompt_routing=prompt_routing,
            finish_reason=out.finish_reason,
            policy_version=version,
        )

    def score(self, prompt_ids: Sequence[int], completion_ids: Sequence[int], temperature: float = 1.0) -> list[float]:
        """The server's log-probs of given tokens (:class:`~lego_rl.kinds.ScoresTokens`), from
        the raw logits at any ``temperature``, as vLLM reports its sampled ones."""
        if not prompt_ids or not completion_ids:
            return []
        with self._inflight.generation():
            return self.client.score([*prompt_ids, *completion_ids], len(prompt_ids))

    def _routing(
        self, client: CompletionClient, prompt: list[int], completion: list[int]
    ) -> tuple[list[Any] | None, list[Any] | None]:
        """(per completion token, per prompt token or None) routed experts; (None, None) off."""
        if not self.options.enable_routing_replay:
            return None, None
        start = 0 if self.options.prompt_routing else len(prompt)
        if not completion and start == len(prompt):
            return [], None
        experts = client.routing(prompt + completion, start).tolist()
        cut = len(prompt) - start
        return experts[cut:], (experts[:cut] if self.options.prompt_routing else None)

    # ------------------------------------------------------------ weights

    def load_weights(self, state_dict: dict[str, Any], version: int) -> None:
        """Make the server sample with ``state_dict`` from now on and report ``version``.

        Waits for the generations in flight (they finish on the old weights and report the
        old version); generations arriving meanwhile wait for the new weights.
        """
        if self.options.weight_sync == "none":
            raise RuntimeError(
                "inference 'vllm' has weight_sync: none, so it cannot take the trainer's weights; "
                "set inference.options.weight_sync: reload (the server needs VLLM_SERVER_DEV_MODE=1)"
            )
        client = self.client
        if self.weights_dir is None:
            raise RuntimeError(
                "inference 'vllm' attached to a server needs inference.options.weights_dir: the "
                "staged directory the server serves (python -m legorl_vllm.weights MODEL_DIR DIR)"
            )
        with self._inflight.update():
            write_weights(state_dict, self.weights_dir, self.options.weights_dtype)
            reload_from_disk(client, self.options.request_timeout_s)
            self.policy_version = version

    # ------------------------------------------------------------ checks and lifecycle

    def preflight(self) -> list[Problem]:
        problems: list[Problem] = []
        options = self.options
        if options.url is not None:
            problems += self._attached_problems()
        elif shutil.which(options.executable) is None:
            problems.append(missing_executable(options.executable))
        elif (
            options.weight_sync == "reload"
            and self.spec.path
            and not Path(self.spec.path).is_dir()
        ):
            problems.append(
                Problem(
                    f"weight_sync: reload needs model.path to be a local checkpoint directory, got {self.spec.path!r}",
                    fix="download the checkpoint and point model.path at it, or set weight_sync: none",
                )
            )
        if restricts_output(self.spec):
            problems.append(
                Problem(
                    "model.config.output_vocab restricts what the policy emits, which only the "
                    "embedded hf backend and trainer honour: vLLM samples the whole vocabulary, so "
                    "its log-probs would not be the trainer's",
                    fix="remove output_vocab from model.config (or from the checkpoint's config.json), "
                    "or use inference: hf",
                )
            )
        if self.spec.tokenizer != "qwen3" and not Path(self.spec.tokenizer).is_dir():
            problems.append(
                Problem(
                    f"model.tokenizer {self.spec.tokenizer!r} is neither 'qwen3' nor a local directory",
                    fix="set it to 'qwen3' or to a directory holding tokenizer.json",
                )
            )
        return problems

    def _attached_problems(self) -> list[Problem]:
        url = self.options.url
        probe = CompletionClient(
            url or "",
            self.served_name,
            api_key=self.options.api_key,
            connect_timeout_s=5.0,
        )
        try:
            if not probe.healthy():
                return [
                    Problem(
                        f"inference 'vllm' cannot reach a healthy server at {url} (GET /health failed)",
                        fix="start `vllm serve` there, or fix inference.options.url (or remove it to launch one)",
                    )
                ]
            served = probe.served_models()
        except VLLMError as exc:
            return [
                Problem(
                    f"inference 'vllm': {exc}",
                    fix="check the server at inference.options.url",
                )
            ]
        finally:
            probe.close()
        problems: list[Problem] = []
        if self.served_name not in served:
            problems.append(
                Problem(
                    f"the vLLM server at {url} serves {served}, not {self.served_name!r}",
                    fix="set inference.options.served_model_name (or model.name) to the served name",
                )
            )
        if self.options.weight_sync == "reload" and (
            self.weights_dir is None or not is_staged(self.weights_dir)
        ):
            problems.append(
                Problem(
                    f"weight_sync: reload on an attached server needs a staged weights_dir (got {self.weights_dir})",
                    fix="python -m legorl_vllm.weights MODEL_DIR DIR; serve DIR with VLLM_SERVER_DEV_MODE=1; "
                    "set weights_dir: DIR (or weight_sync: none)",
                    fatal=False,
                )
            )
        return problems

    def close(self) -> None:
        """Stop a launched server and drop the connection (attached servers keep running)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
            if self._server is not None:
                self._server.stop()
            self._client = self._server = None


# ---------------------------------------------------------------- registration


def factory(options: VLLMOptions, ctx: BuildContext) -> VLLMInference:
    if ctx.spec is None:
        raise ValueError(
            "inference 'vllm' needs the spec's `model` block; build it from a spec"
        )
    model = ctx.spec.model
    update: dict[str, str] = {}
    if model.path and ctx.path(model.path).is_dir():
        update["path"] = str(ctx.path(model.path))  # a hub id stays as given
    if model.tokenizer != "qwen3" and ctx.path(model.tokenizer).is_dir():
        update["tokenizer"] = str(ctx.path(model.tokenizer))
    if model.chat_template not in ("qwen3", "native"):
        update["chat_template"] = str(ctx.path(model.chat_template))
    weights_dir = ctx.path(options.weights_dir) if options.weights_dir else None
    return VLLMInference(
        model.model_copy(update=update),
        options,
        run_dir=ctx.run_dir,
        weights_dir=weights_dir,
        seed=ctx.spec.run.seed,
    )


def restricts_output(model: ModelSpec) -> bool:
    """Whether the model's config (the spec's, or the checkpoint's config.json) sets
    ``output_vocab`` (see legorl_embedded.policy.output_vocab)."""
    if model.config.get("output_vocab") is not None:
        return True
    config = Path(model.path).expanduser() / "config.json" if model.path else None
    if config is None or not config.is_file():
        return False
    try:
        return json.loads(config.read_text()).get("output_vocab") is not None
    except (OSError, ValueError):
        return False
