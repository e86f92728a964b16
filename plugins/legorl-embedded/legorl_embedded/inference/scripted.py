"""The ``scripted`` inference plugin: replies from a script, scored by the real policy model.

For conformance tests of harnesses: each call's reply is the next turn of a script (text and
tool calls), written in the policy's own output format (Qwen3: ``<tool_call>{json}</tool_call>``
blocks after the text), tokenized with the policy tokenizer and followed by eos. The model
then scores prompt + reply in one forward pass, so every CallRecord carries the real ids,
the log-prob each scripted token has under the model (at the session's temperature; 1 when
that is 0, since a script is not a greedy choice) and, for MoE models, the routed experts.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from lego_rl.data import ABORTED, Generation, Sampling
from lego_rl.kinds import Problem
from lego_rl.registry import BuildContext
from legorl_embedded.inference.hf import HFInference
from legorl_embedded.inference.hf import factory as hf_factory
from legorl_embedded.inference.scripted_options import ScriptedInferenceOptions, ScriptTurn
from legorl_embedded.options import HFInferenceOptions
from legorl_embedded.policy.logprobs import completion_logprobs
from legorl_embedded.policy.output_vocab import OutputVocab, model_output_vocab
from legorl_embedded.policy.routing import RoutingRecorder, as_routing


def render_turn(turn: ScriptTurn) -> str:
    """A turn as the Qwen3 template renders an assistant message: text, then each tool call."""
    parts = [turn.text]
    for index, call in enumerate(turn.tool_calls):
        separator = "\n" if turn.text or index else ""
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        parts.append(f'{separator}<tool_call>\n{{"name": "{call.name}", "arguments": {arguments}}}\n</tool_call>')
    return "".join(parts)


class ScriptedInference:
    """Replies from a script; scores them with the policy model (loaded on first use)."""

    def __init__(self, options: ScriptedInferenceOptions, policy: HFInference):
        self.options = options
        self.policy = policy
        self.calls = 0
        self._lock = threading.Lock()
        self._scoring = threading.Lock()
        """One scoring pass at a time: each pass's routing hooks see every forward of the model."""
        self._vocab: OutputVocab | None = None
        self._taken: dict[int, int] = {}
        """With ``by_call``: the last turn taken of each call number's list."""

    @property
    def tokenizer(self) -> Any:
        return self.policy.tokenizer

    @property
    def policy_version(self) -> int:
        return self.policy.policy_version

    def preflight(self) -> list[Problem]:
        return self.policy.preflight()

    def score(self, prompt_ids: Sequence[int], completion_ids: Sequence[int], temperature: float = 1.0) -> list[float]:
        """The policy model's log-probs of given tokens (:class:`~lego_rl.kinds.ScoresTokens`)."""
        return self.policy.score(prompt_ids, completion_ids, temperature)

    def next_text(self, prompt_ids: Sequence[int] = ()) -> str:
        """The next reply of the script (``final_text`` once it has run out): the next of
        ``turns``, or with ``by_call`` the next of the list of the session's call number (the
        assistant turns ``prompt_ids`` holds before its own)."""
        by_call = self.options.by_call
        with self._lock:
            self.calls += 1
            if not by_call:
                turns, index = self.options.turns, self.calls - 1
            else:
                depth = max(_count(prompt_ids, self._assistant_header) - 1, 0)
                turns = by_call[depth] if depth < len(by_call) else []
                index = self._taken[depth] = self._taken.get(depth, -1) + 1
        return render_turn(turns[index]) if index < len(turns) else self.options.final_text

    @functools.cached_property
    def _assistant_header(self) -> list[int]:
        """The tokens that open an assistant turn (encoded once, on the first ``by_call`` reply)."""
        return self.tokenizer.encode("<|im_start|>assistant", add_special_tokens=False)

    def generate(
        self,
        prompt_ids: Sequence[int],
        sampling: Sampling,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Generation:
        """The next scripted reply (+ eos), cut at ``max_tokens`` / the context, scored."""
        return self.generate_abortable(prompt_ids, sampling, None, on_token)

    def generate_abortable(
        self,
        prompt_ids: Sequence[int],
        sampling: Sampling,
        abort: threading.Event | None,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Generation:
        """:meth:`generate`, ended once ``abort`` is set (:class:`lego_rl.kinds.AbortsGenerations`):
        not scored when set before, else cut before the next token handed over."""
        if abort is not None and abort.is_set():
            return Generation(
                completion_ids=[], logprobs=[], finish_reason=ABORTED, policy_version=self.policy_version
            )
        tokenizer = self.tokenizer
        ids = [*tokenizer.encode(self.next_text(prompt_ids), add_special_tokens=False), tokenizer.eos_token_id]
        budget = min(sampling.max_tokens, self.policy.max_context - len(prompt_ids))
        finish = "stop" if len(ids) <= budget else "length"
        ids = ids[: max(budget, 0)]
        if not ids or not prompt_ids:
            return Generation(completion_ids=[], logprobs=[], finish_reason="length", policy_version=self.policy_version)
        logprobs, routing, prompt_routing = self._score(prompt_ids, ids, sampling.temperature or 1.0)
        for n, (token, logprob) in enumerate(zip(ids, logprobs, strict=True)):
            if abort is not None and abort.is_set():
                ids, logprobs, finish = ids[:n], logprobs[:n], ABORTED
                routing = routing[:n] if routing is not None else None
                break
            if on_token is not None:
                on_token(token, logprob)
        return Generation(
            completion_ids=ids,
            logprobs=logprobs,
            routing=routing,
            prompt_routing=prompt_routing,
            finish_reason=finish,
            policy_version=self.policy_version,
        )

    def _score(self, prompt: Sequence[int], completion: list[int], temperature: float) -> tuple[list[float], Any, Any]:
        """Log-probs of ``completion`` after ``prompt``, and the routing of every position."""
        model = self.policy.model
        if self._vocab is None:
            self._vocab = model_output_vocab(model, self.tokenizer)
        recorder = RoutingRecorder(model)
        with self._scoring, recorder:
            logprobs = completion_logprobs(
                model, prompt, completion, temperature=temperature, vocab=self._vocab, device=self.policy.device
            )
            indices = recorder.pop()
        if indices is None:
            return logprobs, None, None
        return logprobs, as_routing(indices[len(prompt) :]), as_routing(indices[: len(prompt)])


def _count(ids: Sequence[int], part: list[int]) -> int:
    """How often ``part`` occurs in ``ids``."""
    n = len(part)
    return sum(1 for i in range(len(ids) - n + 1) if list(ids[i : i + n]) == part) if n else 0


def factory(options: ScriptedInferenceOptions, ctx: BuildContext) -> ScriptedInference:
    return ScriptedInference(options, hf_factory(HFInferenceOptions(device=options.device), ctx))
