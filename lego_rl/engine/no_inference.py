"""An inference backend for trials whose harness never calls the model.

``legorl check-tasks``, the red team and the sandbox benchmark run scripted harnesses: their
commands are given in advance, so the proxy in front of them needs a tokenizer (to render and
record) but no model. A call reaching :class:`NoInference` is a bug in that harness or trial,
and :class:`ModelCalled` says so instead of answering.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lego_rl.data import Generation, Sampling
from lego_rl.kinds import Problem
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer


class ModelCalled(RuntimeError):
    """A trial that runs without a model called it."""


class NoInference:
    """The tiny offline tokenizer and no model: :meth:`generate` raises :class:`ModelCalled`."""

    policy_version = 0

    def __init__(self, tokenizer: Any = None) -> None:
        self.tokenizer = tokenizer if tokenizer is not None else tiny_chat_tokenizer()

    def generate(
        self,
        prompt_ids: Sequence[int],
        sampling: Sampling,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Generation:
        raise ModelCalled(
            f"a trial without a model called it (a prompt of {len(prompt_ids)} tokens): "
            "its harness is scripted and must not reach the proxy's model"
        )

    def preflight(self) -> list[Problem]:
        return []
