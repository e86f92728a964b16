"""Weight updates from the trainer into a vLLM server, through its model directory.

The server serves a *staged* directory: symlinks to every file of the real checkpoint plus a
marker, so replacing the weights never touches the user's files. An update writes the
trainer's state dict as one ``model.safetensors`` there (Hugging Face parameter names, as
``save_pretrained`` writes them), drops the other weight files, and asks the server to reload
from disk with vLLM's dev endpoints (``VLLM_SERVER_DEV_MODE=1``, vLLM >= 0.33):

1. ``POST /pause?mode=wait``: finish the requests in flight, admit none;
2. ``POST /collective_rpc {"method": "reload_weights"}``: every worker reloads the model
   directory in place (``ModelRunner.reload_weights`` with no iterator reads from disk);
3. ``POST /resume`` (also when the reload failed, so the server never stays paused).

``python -m legorl_vllm.weights SRC DST`` stages ``DST`` from ``SRC`` for a server you start
yourself (then attach with ``inference.options.url`` and ``weights_dir: DST``).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from legorl_vllm.client import CompletionClient

MARKER = ".legorl-vllm-weights"
"""A directory holding this file is ours to rewrite."""
WEIGHTS_FILE = "model.safetensors"
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
_INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def stage_model_dir(source: Path, target: Path) -> Path:
    """Make ``target`` a rewritable view of checkpoint ``source``: a symlink per entry + marker."""
    source, target = source.resolve(), target.resolve()
    if not (source / "config.json").is_file():
        raise ValueError(f"{source} is not a checkpoint directory (no config.json)")
    if target.exists() and any(target.iterdir()) and not (target / MARKER).exists():
        raise ValueError(
            f"{target} exists and was not staged by legorl-vllm; pick an empty directory"
        )
    target.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        link = target / entry.name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(entry)
    (target / MARKER).write_text(f"staged from {source}\n")
    return target


def is_staged(directory: Path) -> bool:
    return (directory / MARKER).is_file()


def write_weights(state_dict: dict[str, Any], directory: Path, dtype: str) -> Path:
    """Write ``state_dict`` as the only weights of staged ``directory`` (atomically replaced)."""
    import torch
    from safetensors.torch import save_file

    if not is_staged(directory):
        raise ValueError(
            f"weights_dir {directory} was not staged by legorl-vllm (no {MARKER}); stage it with "
            f"`python -m legorl_vllm.weights MODEL_DIR {directory}` and serve that directory"
        )
    cast = getattr(torch, dtype)
    # Fresh contiguous copies: tied parameters share storage, which safetensors refuses.
    tensors = {
        name: value.detach()
        .to(device="cpu", dtype=cast if value.is_floating_point() else value.dtype)
        .contiguous()
        .clone()
        for name, value in state_dict.items()
    }
    tmp = directory / f".{WEIGHTS_FILE}.tmp"
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    for entry in directory.iterdir():
        if entry.name in _INDEX_FILES or (
            entry.name.endswith(_WEIGHT_SUFFIXES) and entry.name != WEIGHTS_FILE
        ):
            entry.unlink()
    path = directory / WEIGHTS_FILE
    if path.is_symlink():
        path.unlink()
    os.replace(tmp, path)
    return path


def reload_from_disk(client: CompletionClient, timeout_s: float) -> None:
    """Steps 1-3 of the module docstring; the server is resumed whatever happens."""
    client.request("POST", "/pause", params={"mode": "wait"})
    try:
        client.request(
            "POST",
            "/collective_rpc",
            json_body={"method": "reload_weights", "timeout": timeout_s},
        )
    finally:
        client.request("POST", "/resume")


class InFlight:
    """Generations share the backend; a weight update waits for them and holds new ones back,
    so every generation is sampled with exactly the version it reports."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = 0
        self._updating = False

    @contextmanager
    def generation(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._updating)
            self._running += 1
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()

    @contextmanager
    def update(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._updating)
            self._updating = True
            self._cond.wait_for(lambda: self._running == 0)
        try:
            yield
        finally:
            with self._cond:
                self._updating = False
                self._cond.notify_all()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(
            "usage: python -m legorl_vllm.weights MODEL_DIR STAGED_DIR", file=sys.stderr
        )
        return 2
    print(stage_model_dir(Path(argv[0]), Path(argv[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
