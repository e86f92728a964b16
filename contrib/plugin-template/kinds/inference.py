"""The {{name}} inference backend: samples completions with their log-probs.

Fill in :meth:`{{Class}}.generate` (and the tokenizer); until then the preflight says so and
the sampling contract fails naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from lego_rl import hookimpl
from lego_rl.data import Generation, Sampling
from lego_rl.kinds import Problem
from lego_rl.registry import BuildContext


class {{Class}}Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    """TODO: where your serving backend listens, if it is a server."""


class {{Class}}:
    """The {{name}} inference backend."""

    def __init__(self, options: {{Class}}Options, ctx: BuildContext) -> None:
        self.options = options
        self.model = ctx.spec.model if ctx.spec is not None else None
        self.policy_version = 0

    @property
    def tokenizer(self) -> Any:
        """TODO: a Hugging Face tokenizer with the model's chat template."""
        return None

    def preflight(self) -> list[Problem]:
        if self.tokenizer is None:
            return [Problem("{{name}}: generate() and the tokenizer are not written yet", "fill in {{package}}/plugin.py")]
        return []

    def generate(
        self,
        prompt_ids: Sequence[int],
        sampling: Sampling,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Generation:
        """TODO: sample up to sampling.max_tokens tokens after prompt_ids, calling on_token(id,
        logprob) for each as it is sampled; return the ids, their log-probs (and MoE routing)."""
        raise NotImplementedError("{{name}}: generate() is not written yet")

    def score(self, prompt_ids: Sequence[int], completion_ids: Sequence[int], temperature: float = 1.0) -> list[float]:
        """TODO (ScoresTokens, required by contract inference.logprobs-are-the-models): the
        model's log-prob of each of completion_ids after what precedes it (teacher forcing),
        from the distribution generate() samples at ``temperature``."""
        raise NotImplementedError("{{name}}: score() is not written yet")

    # Optional capabilities (lego_rl.kinds; CONTRIBUTING.md "Optional capabilities").
    #
    # LoadsWeights: the trainer publishes new weights (else the policy never changes).
    # def load_weights(self, state_dict: dict[str, Any], version: int) -> None:
    #     self.policy_version = version
    #
    # AbortsGenerations: stop when the client went away, freeing the slot.
    # def generate_abortable(self, prompt_ids, sampling, abort: threading.Event, on_token=None) -> Generation: ...
    #
    # RestoresRngState: a checkpoint saves the sampling randomness, a resume restores it.
    # def get_rng_state(self) -> Any: ...
    # def set_rng_state(self, state: Any) -> None: ...
    #
    # HoldsResources: a launched server stops when the run ends.
    # def close(self) -> None: ...


@hookimpl
def legorl_register_inference(register) -> None:
    register("{{name}}", {{Class}}, options={{Class}}Options)
