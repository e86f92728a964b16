"""The one wiring of trials: a proxy in front of an inference backend, serving one dialect for
one model, and the trial runners whose harnesses call it. ``legorl apply`` and ``probe`` (the
rollouts), the scripted trial (contracts, warm start), the red team and verl's agent loop all
build theirs here, so a new proxy or runner setting is given in one place."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lego_rl.data import CallRecord, Sampling
from lego_rl.engine.no_inference import NoInference
from lego_rl.engine.trial import TrialRunner, TrialSetup
from lego_rl.kinds import AntiCheat, Dialect, Event, Harness, Inference, SandboxBackend, Verifier
from lego_rl.proxy.server import ProxyServer
from lego_rl.spec.models import ModelSpec, RunSpec


@dataclass(frozen=True)
class TrialLimits:
    """How the policy samples in a trial, and how many calls the trial may make."""

    sampling: Sampling
    max_calls: int | None = None

    @classmethod
    def of_run(cls, run: RunSpec) -> TrialLimits:
        """A spec's: its temperature and max tokens, ``max_turns`` calls and two to spare."""
        return cls(Sampling(temperature=run.temperature, max_tokens=run.max_tokens), run.max_turns + 2)


class TrialWiring:
    """``proxy``, not started, serving ``codec`` under the name ``dialect`` for ``model`` in
    front of ``inference`` (``proxy_options``: the rest of :class:`ProxyServer`'s settings);
    :meth:`runner` makes trial runners that use it."""

    def __init__(
        self,
        inference: Inference | Any,
        dialect: str,
        codec: Dialect,
        model: ModelSpec,
        *,
        on_call: Callable[[CallRecord], None] | None = None,
        **proxy_options: Any,
    ) -> None:
        self.dialect, self.model_name = dialect, model.name
        self.proxy = ProxyServer(
            inference,
            {dialect: codec},
            model_name=model.name,
            max_context=model.max_context,
            chat_template=model.chat_template,
            on_call=on_call,
            **proxy_options,
        )

    def runner(
        self,
        *,
        sandbox: SandboxBackend,
        harness: Harness,
        verifier: Verifier,
        limits: TrialLimits,
        anticheat: Sequence[AntiCheat] = (),
        emit: Callable[[Event], None] = lambda event: None,
    ) -> TrialRunner:
        """A runner of trials through this proxy."""
        return TrialRunner(
            TrialSetup(
                sandbox=sandbox,
                harness=harness,
                verifier=verifier,
                proxy=self.proxy,
                dialect=self.dialect,
                model_name=self.model_name,
                sampling=limits.sampling,
                max_calls=limits.max_calls,
                anticheat=list(anticheat),
                emit=emit,
            )
        )

    @classmethod
    def without_model(cls, dialect: str, codec: Dialect, **proxy_options: Any) -> TrialWiring:
        """A wiring for scripted harnesses, which never call the model: the proxy serves
        ``codec`` over :class:`~lego_rl.engine.no_inference.NoInference`, whose tokenizer is
        the tiny offline one, and any call to the model fails with ``ModelCalled``."""
        return cls(NoInference(), dialect, codec, ModelSpec(name="policy"), **proxy_options)

    @contextmanager
    def serving(self) -> Iterator[TrialWiring]:
        """The proxy started for the block, stopped after it whatever happens."""
        self.proxy.start()
        try:
            yield self
        finally:
            self.proxy.stop()
