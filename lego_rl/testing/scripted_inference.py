"""A scripted inference backend for tests: replies given in advance, token by token.

The dialects' SDK contract (:mod:`lego_rl.testing.contracts.dialect_sdk`) and the tests drive
the proxy with it; no product path uses it (``tests/test_core_imports.py`` checks).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from lego_rl.data import ABORTED, Generation, Sampling
from lego_rl.kinds import Problem
from lego_rl.tiny_tokenizer import tiny_chat_tokenizer


def scripted_logprob(position: int) -> float:
    """A distinct log-prob per completion position, so misalignment shows in tests."""
    return -0.01 * (position + 1)


class ScriptedInference:
    """Returns scripted replies in order (the tokens of each text, then eos).

    A reply may be an exception instance, which ``generate`` raises. ``prompts`` and
    ``samplings`` record what each call received. Tokens go to ``on_token`` one by one,
    ``token_delay`` seconds apart (so tests can see a stream arrive before generation ends);
    ``token_times`` keeps when each was handed over, ``ended`` when each generation returned.
    ``drawn`` keeps how many tokens each generation handed over, ``aborted`` which ones were
    stopped early (see :class:`AbortableScriptedInference`).
    """

    def __init__(
        self,
        tokenizer: Any,
        replies: Sequence[str | BaseException],
        *,
        token_delay: float = 0.0,
    ):
        self.tokenizer = tokenizer
        self.policy_version = 0
        self.replies = list(replies)
        self.token_delay = token_delay
        self.prompts: list[list[int]] = []
        self.samplings: list[Sampling] = []
        self.token_times: list[float] = []
        self.ended: list[float] = []
        self.drawn: list[int] = []
        self.aborted: list[bool] = []

    def generate(
        self,
        prompt_ids: Sequence[int],
        sampling: Sampling,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Generation:
        return self._generate(prompt_ids, sampling, on_token, None)

    def _generate(
        self,
        prompt_ids: Sequence[int],
        sampling: Sampling,
        on_token: Callable[[int, float], None] | None,
        abort: threading.Event | None,
    ) -> Generation:
        self.prompts.append(list(prompt_ids))
        self.samplings.append(sampling)
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        ids = [
            *self.tokenizer.encode(reply, add_special_tokens=False),
            self.tokenizer.eos_token_id,
        ]
        finish = "stop" if len(ids) <= sampling.max_tokens else "length"
        ids = ids[: sampling.max_tokens]
        logprobs = [scripted_logprob(i) for i in range(len(ids))]
        drawn = 0
        try:
            for token, logprob in zip(ids, logprobs, strict=True):
                if self.token_delay:
                    time.sleep(self.token_delay)
                if abort is not None and abort.is_set():
                    ids, logprobs, finish = ids[:drawn], logprobs[:drawn], ABORTED
                    break
                self.token_times.append(time.monotonic())
                drawn += 1
                if on_token is not None:
                    on_token(token, logprob)  # may raise: the generation stops there
        finally:
            self.ended.append(time.monotonic())
            self.drawn.append(drawn)
            self.aborted.append(drawn < len(ids) or finish == ABORTED)
        return Generation(
            completion_ids=ids,
            logprobs=logprobs,
            finish_reason=finish,
            policy_version=self.policy_version,
        )

    def preflight(self) -> list[Problem]:
        return []


class AbortableScriptedInference(ScriptedInference):
    """:class:`ScriptedInference` that offers :class:`lego_rl.kinds.AbortsGenerations`: it
    stops before the next token once ``abort`` is set (the plain one is stopped only by an
    ``on_token`` that raises)."""

    def generate_abortable(
        self,
        prompt_ids: Sequence[int],
        sampling: Sampling,
        abort: threading.Event,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Generation:
        return self._generate(prompt_ids, sampling, on_token, abort)


@contextmanager
def scripted_proxy(
    dialects: dict[str, Any],
    replies: Sequence[str | BaseException],
    *,
    dialect: str = "",
    token_delay: float = 0.0,
    sampling: Sampling | None = None,
    **server_options: Any,
) -> Iterator[tuple[Any, Any, ScriptedInference]]:
    """A started ProxyServer over :class:`ScriptedInference` and the tiny tokenizer, with one
    open session ``"trial-1"`` in ``dialect`` (the first one by default): (server, session,
    inference). Stopped on exit."""
    from lego_rl.proxy.server import ProxyServer

    inference = ScriptedInference(tiny_chat_tokenizer(), replies, token_delay=token_delay)
    server = ProxyServer(inference, dialects, model_name="tiny-policy", **server_options)
    server.start()
    try:
        session = server.open_session(
            "trial-1",
            dialect or next(iter(dialects)),
            sampling=sampling or Sampling(max_tokens=400),
        )
        yield server, session, inference
    finally:
        server.stop()
