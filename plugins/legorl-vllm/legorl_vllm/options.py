"""Options of the ``vllm`` inference plugin (pydantic only: registering it stays instant)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class VLLMOptions(BaseModel):
    """Attach to a running vLLM server (``url``) or launch ``vllm serve`` for the spec's model."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(
        default=None,
        description="Root of a running vLLM server (e.g. http://10.0.0.5:8000); none launches "
        "`vllm serve` on this machine.",
    )
    served_model_name: str | None = Field(
        default=None,
        description="Model name the server answers to; none uses model.name.",
    )
    api_key: str | None = Field(
        default=None, description="Bearer token of the server (--api-key), if any."
    )
    # ---------------------------------------------------------------- launch settings
    executable: str = Field(
        default="vllm", description="The vLLM CLI to launch (a name on PATH or a path)."
    )
    host: str = Field(
        default="127.0.0.1", description="Interface a launched server binds."
    )
    port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Port of a launched server; none picks a free one.",
    )
    tensor_parallel_size: int = Field(
        default=1, ge=1, description="--tensor-parallel-size of a launched server."
    )
    gpu_memory_utilization: float = Field(
        default=0.9,
        gt=0.0,
        le=1.0,
        description="--gpu-memory-utilization of a launched server.",
    )
    enable_routing_replay: bool = Field(
        default=False,
        description="Return the experts every token was routed to (MoE): launches with "
        "--enable-return-routed-experts and records routing per token for replay in training.",
    )
    prompt_routing: bool = Field(
        default=True,
        description="With routing replay, also record the routing of prompt tokens (tool outputs and "
        "other inserted text), so training replays them too; off returns completion routing only.",
    )
    extra_args: list[str] = Field(
        default_factory=list,
        description="More `vllm serve` flags, passed as given (e.g. ['--enforce-eager']).",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment of a launched server."
    )
    startup_timeout_s: float = Field(
        default=900.0,
        gt=0,
        description="How long a launched server may take until /health answers.",
    )
    log_file: str | None = Field(
        default=None,
        description="Where a launched server's output goes; none: <run dir>/vllm-server.log.",
    )
    # ---------------------------------------------------------------- requests
    request_timeout_s: float = Field(
        default=1800.0,
        gt=0,
        description="Longest one generation request may take (read timeout).",
    )
    connect_timeout_s: float = Field(
        default=10.0, gt=0, description="Connect timeout of every request."
    )
    stream: bool = Field(
        default=True,
        description="Stream tokens (SSE) so the proxy forwards them as they arrive; off waits for "
        "the whole completion.",
    )
    # ---------------------------------------------------------------- weights
    weight_sync: Literal["reload", "none"] = Field(
        default="reload",
        description="reload: the trainer's weights are written as safetensors into weights_dir and the "
        "server reloads them (vLLM dev endpoints /pause, /collective_rpc reload_weights, /resume); "
        "none: the policy is frozen (evaluation, or a trainer that syncs weights itself, e.g. verl).",
    )
    weights_dir: str | None = Field(
        default=None,
        description="The model directory the server serves and reloads from. Launched: none stages "
        "<run dir>/vllm-weights from model.path. Attached: the directory the server was started on.",
    )
    weights_dtype: Literal["bfloat16", "float16", "float32"] = Field(
        default="bfloat16", description="dtype of the weights written for a reload."
    )

    @model_validator(mode="after")
    def _check(self) -> VLLMOptions:
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        return self
