"""A small real HTTP server that speaks vLLM's documented API, for CPU tests.

:class:`FakeVLLM` serves a real policy (an ``hf`` backend of legorl-embedded, e.g. the tiny
Qwen3-MoE with the Qwen3 vocabulary), so log-probs and routed experts are the model's own. It
implements the subset of `vllm serve` (>= 0.33) that :mod:`legorl_vllm` uses, with vLLM's
request/response shapes: ``GET /health``, ``GET /v1/models``, ``POST /v1/completions``
(token-id prompts, ``logprobs``, ``return_token_ids``, ``return_tokens_as_token_ids``,
``stop_token_ids``, ``seed``, SSE streaming, ``routed_experts`` as base64 ``.npy`` of
``(num_tokens - 1, layers, k)`` from ``routed_experts_prompt_start``, non-streaming only), and
the dev endpoints ``/pause``, ``/resume``, ``/is_paused``, ``/collective_rpc``
(``reload_weights`` reloads ``model_dir/model.safetensors``). Errors use vLLM's
``{"error": {"message", "type", "param", "code"}}`` body.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

import numpy as np
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from lego_rl.data import Generation, Sampling
from lego_rl.proxy.threaded import ThreadedServer
from legorl_vllm.client import TOKEN_ID_PREFIX, encode_routed_experts


class _Refused(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "BadRequestError",
        param: str | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param


def error_body(
    status: int, message: str, kind: str, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


class FakeVLLM:
    """`vllm serve` in miniature over ``backend`` (anything with ``generate``, ``tokenizer``,
    ``max_context`` and, for reloads, ``load_weights``). Use as a context manager."""

    def __init__(
        self,
        backend: Any,
        *,
        served_name: str = "tiny",
        routing: bool = True,
        model_dir: Path | None = None,
        dev_mode: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.backend, self.served_name, self.routing = backend, served_name, routing
        self.model_dir, self.dev_mode, self.host, self.port = (
            model_dir,
            dev_mode,
            host,
            port,
        )
        self.requests: list[dict[str, Any]] = []
        """Every /v1/completions body received, in order."""
        self.reloads = 0
        self.injected: tuple[int, str, int | None] | None = None
        """(status, message, after_tokens): the next completion fails; after_tokens set fails a
        stream with an error event after that many tokens (see :meth:`inject_error`)."""
        self._cond = threading.Condition()
        self._paused = False
        self._running = 0
        routes = [
            Route("/health", _threaded(self._health), methods=["GET"]),
            Route("/v1/models", _threaded(self._models), methods=["GET"]),
            Route("/v1/completions", _threaded(self._completions), methods=["POST"]),
        ]
        if dev_mode:
            routes += [
                Route("/pause", _threaded(self._pause), methods=["POST"]),
                Route("/resume", _threaded(self._resume), methods=["POST"]),
                Route("/is_paused", _threaded(self._is_paused), methods=["GET"]),
                Route(
                    "/collective_rpc", _threaded(self._collective_rpc), methods=["POST"]
                ),
            ]
        self.app = Starlette(routes=routes)
        self._serving: ThreadedServer | None = None
        self.url = ""

    # ------------------------------------------------------------ lifecycle

    def start(self) -> Self:
        self._serving = ThreadedServer(self.app, self.host, self.port, "fake-vllm")
        port = self._serving.start(10, "fake vLLM server did not start")
        self.url = f"http://{self.host}:{port}"
        return self

    def stop(self) -> None:
        if self._serving is not None:
            self._serving.stop()
        self._serving = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def inject_error(
        self, status: int, message: str, *, after_tokens: int | None = None
    ) -> None:
        """Fail the next completion with ``status``/``message`` (mid-stream when ``after_tokens``)."""
        self.injected = (status, message, after_tokens)

    # ------------------------------------------------------------ routes

    def _health(self, request: Request, raw: bytes) -> Response:
        return Response(status_code=200)

    def _models(self, request: Request, raw: bytes) -> JSONResponse:
        model = {
            "id": self.served_name,
            "object": "model",
            "owned_by": "vllm",
            "max_model_len": self.backend.max_context,
        }
        return JSONResponse({"object": "list", "data": [model]})

    def _completions(self, request: Request, raw: bytes) -> Response:
        body = json.loads(raw)
        self.requests.append(body)
        try:
            prompt, sampling, start = self._parse(body)
            injected, self.injected = self.injected, None
            if injected is not None and injected[2] is None:
                raise _Refused(
                    injected[0],
                    injected[1],
                    "InternalServerError" if injected[0] >= 500 else "BadRequestError",
                )
        except _Refused as refused:
            return JSONResponse(
                error_body(
                    refused.status, refused.message, refused.kind, refused.param
                ),
                refused.status,
            )
        if body.get("stream"):
            fail_after = injected[2] if injected else None
            return StreamingResponse(
                self._stream(body, prompt, sampling, fail_after, injected),
                media_type="text/event-stream",
            )
        with self._admitted():
            gen = self.backend.generate(prompt, sampling)
            scored = (
                self.backend.score(prompt[:1], prompt[1:])
                if body.get("prompt_logprobs") is not None
                else None
            )
        choice = self._choice(
            body, prompt, gen.completion_ids, gen.logprobs, gen.finish_reason
        )
        if scored is not None:
            tok = self.backend.tokenizer
            choice["prompt_logprobs"] = [None] + [
                {str(t): {"logprob": lp, "rank": 1, "decoded_token": tok.decode([t])}}
                for t, lp in zip(prompt[1:], scored, strict=True)
            ]
        if self.routing and gen.routing is not None:
            rows = [*(gen.prompt_routing or []), *gen.routing][
                start : len(prompt) + len(gen.completion_ids) - 1
            ]
            choice["routed_experts"] = encode_routed_experts(
                np.asarray(rows, dtype=np.int32)
            )
        usage = {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(gen.completion_ids),
        }
        return JSONResponse(
            {
                "id": "cmpl-fake",
                "object": "text_completion",
                "created": int(time.time()),
                "model": self.served_name,
                "choices": [choice],
                "usage": {**usage, "total_tokens": sum(usage.values())},
            }
        )

    def _parse(self, body: dict[str, Any]) -> tuple[list[int], Sampling, int]:
        if body.get("model") not in (None, self.served_name):
            raise _Refused(
                404,
                f"The model `{body.get('model')}` does not exist.",
                "NotFoundError",
                "model",
            )
        prompt = body.get("prompt")
        if (
            not isinstance(prompt, list)
            or not prompt
            or not all(isinstance(t, int) and t >= 0 for t in prompt)
        ):
            raise _Refused(
                400,
                "Either prompt or prompt_embeds must be provided and non-empty.",
                param="prompt",
            )
        vocab = len(self.backend.tokenizer)
        if max(prompt) >= vocab:
            raise _Refused(
                400, f"Token id {max(prompt)} is out of vocabulary", param="prompt"
            )
        max_tokens = int(body.get("max_tokens") or 16)
        limit = self.backend.max_context
        if len(prompt) + max_tokens > limit:
            raise _Refused(
                400,
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{len(prompt) + max_tokens} tokens ({len(prompt)} in the messages, {max_tokens} in the completion).",
                param="max_tokens",
            )
        start = int(body.get("routed_experts_prompt_start") or 0)
        if start and start >= len(prompt):
            raise _Refused(
                400,
                "routed_experts_prompt_start must be smaller than the prompt token count",
            )
        top_k = body.get("top_k")
        sampling = Sampling(
            temperature=1.0
            if body.get("temperature") is None
            else float(body["temperature"]),
            top_p=1.0 if body.get("top_p") is None else float(body["top_p"]),
            top_k=int(top_k) if top_k and top_k > 0 else -1,
            max_tokens=max_tokens,
            stop_token_ids=list(body.get("stop_token_ids") or []),
            seed=body.get("seed"),
        )
        return prompt, sampling, start

    def _choice(
        self,
        body: dict[str, Any],
        prompt: list[int],
        ids: list[int],
        logprobs: list[float],
        finish: str | None,
    ) -> dict[str, Any]:
        tok = self.backend.tokenizer
        choice: dict[str, Any] = {
            "index": 0,
            "text": tok.decode(
                ids, skip_special_tokens=body.get("skip_special_tokens", True)
            ),
            "finish_reason": finish,
            "stop_reason": ids[-1]
            if finish == "stop"
            and ids
            and ids[-1] in (body.get("stop_token_ids") or [])
            else None,
        }
        if body.get("logprobs") is not None:
            as_ids = bool(body.get("return_tokens_as_token_ids"))
            tokens = [
                f"{TOKEN_ID_PREFIX}{t}" if as_ids else tok.decode([t]) for t in ids
            ]
            choice["logprobs"] = {
                "text_offset": list(range(len(ids))),
                "token_logprobs": logprobs,
                "tokens": tokens,
                "top_logprobs": [
                    {t: lp} for t, lp in zip(tokens, logprobs, strict=True)
                ],
            }
        if body.get("return_token_ids"):
            choice["token_ids"] = ids
            choice["prompt_token_ids"] = prompt
        return choice

    def _stream(
        self,
        body: dict[str, Any],
        prompt: list[int],
        sampling: Sampling,
        fail_after: int | None,
        injected: tuple[int, str, int | None] | None,
    ) -> Iterator[str]:
        """One SSE event per token as the backend samples it (from a worker thread), then the
        finish event and ``[DONE]``; ``fail_after`` tokens in, an error event instead."""
        events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()

        def work() -> None:
            try:
                with self._admitted():
                    gen = self.backend.generate(
                        prompt,
                        sampling,
                        on_token=lambda t, lp: events.put(("token", (t, lp))),
                    )
                events.put(("done", gen))
            except Exception as exc:  # noqa: BLE001 - reported in the stream like vLLM does
                events.put(("error", exc))

        threading.Thread(target=work, daemon=True).start()
        sent = 0
        while True:
            kind, payload = events.get()
            if (
                kind == "token"
                and fail_after is not None
                and sent >= fail_after
                and injected is not None
            ):
                yield f"data: {json.dumps(error_body(injected[0], injected[1], 'InternalServerError'))}\n\n"
                yield "data: [DONE]\n\n"
                return
            if kind == "token":
                token, logprob = payload
                sent += 1
                yield _event(self, self._choice(body, prompt, [token], [logprob], None))
            elif kind == "done":
                gen: Generation = payload
                yield _event(
                    self, self._choice(body, prompt, [], [], gen.finish_reason)
                )
                yield "data: [DONE]\n\n"
                return
            else:
                yield f"data: {json.dumps(error_body(500, str(payload), 'InternalServerError'))}\n\n"
                yield "data: [DONE]\n\n"
                return

    # ------------------------------------------------------------ dev endpoints

    def _admitted(self) -> Any:
        server = self

        class _Slot:
            def __enter__(self) -> None:
                with server._cond:
                    server._cond.wait_for(lambda: not server._paused)
                    server._running += 1

            def __exit__(self, *exc: object) -> None:
                with server._cond:
                    server._running -= 1
                    server._cond.notify_all()

        return _Slot()

    def _pause(self, request: Request, raw: bytes) -> JSONResponse:
        mode = request.query_params.get("mode", "abort")
        if mode != "wait":
            return JSONResponse(
                {"error": f"fake vLLM supports only mode=wait, not {mode!r}"}, 400
            )
        with self._cond:
            self._paused = True
            self._cond.wait_for(lambda: self._running == 0)
        return JSONResponse({"status": "paused"})

    def _resume(self, request: Request, raw: bytes) -> JSONResponse:
        with self._cond:
            self._paused = False
            self._cond.notify_all()
        return JSONResponse({"status": "resumed"})

    def _is_paused(self, request: Request, raw: bytes) -> JSONResponse:
        return JSONResponse({"is_paused": self._paused})

    def _collective_rpc(self, request: Request, raw: bytes) -> Response:
        body = json.loads(raw)
        if body.get("method") != "reload_weights":
            return JSONResponse(
                error_body(
                    500,
                    f"worker has no method {body.get('method')!r}",
                    "InternalServerError",
                ),
                500,
            )
        if self.model_dir is None:
            return JSONResponse(
                error_body(
                    500,
                    "fake vLLM was started without model_dir",
                    "InternalServerError",
                ),
                500,
            )
        from safetensors.torch import load_file

        state = load_file(str(self.model_dir / "model.safetensors"))
        self.backend.load_weights(state, version=self.backend.policy_version + 1)
        self.reloads += 1
        return JSONResponse({"results": [None]})


def _event(server: FakeVLLM, choice: dict[str, Any]) -> str:
    chunk = {
        "id": "cmpl-fake",
        "object": "text_completion",
        "created": int(time.time()),
        "model": server.served_name,
        "choices": [choice],
    }
    return f"data: {json.dumps(chunk)}\n\n"


def _threaded(
    handler: Callable[[Request, bytes], Response],
) -> Callable[[Request], Any]:
    """An async endpoint that reads the body, then runs the blocking ``handler`` in a thread."""

    async def endpoint(request: Request) -> Response:
        raw = await request.body()
        return await run_in_threadpool(handler, request, raw)

    return endpoint


def main(argv: list[str]) -> None:
    """``python -m legorl_vllm.testing serve MODEL_DIR [vllm serve flags]``: a stand-in for
    `vllm serve` on CPU (the flags it does not need are accepted and ignored)."""
    import argparse
    import os
    import signal

    from legorl_embedded.inference.hf import HFInference, HFInferenceOptions

    from lego_rl.spec.models import ModelSpec

    print("fake vllm:", " ".join(argv), flush=True)
    parser = argparse.ArgumentParser(prog="fake-vllm")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--enable-return-routed-experts", action="store_true")
    args, _ignored = parser.parse_known_args(argv)
    model_dir = Path(args.model)
    spec = ModelSpec(
        name=args.served_model_name or args.model,
        path=str(model_dir),
        max_context=args.max_model_len,
    )
    backend = HFInference(
        spec, HFInferenceOptions(device="cpu", threads=1), seed=args.seed
    )
    server = FakeVLLM(
        backend,
        served_name=spec.name,
        routing=args.enable_return_routed_experts,
        model_dir=model_dir,
        dev_mode=os.environ.get("VLLM_SERVER_DEV_MODE") == "1",
        host=args.host,
        port=args.port,
    )
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    server.start()
    print(f"fake vllm serving {spec.name} at {server.url}", flush=True)
    stopped.wait()
    server.stop()


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
