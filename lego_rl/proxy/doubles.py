"""Test doubles for the proxy: a tiny offline chat tokenizer and a scripted inference backend.

The tokenizer is byte-level (one token per byte, no merges) with the Qwen3 special tokens
and a small chat template of the same ``<|im_start|>role ... <|im_end|>`` shape, tools and
``<tool_call>`` blocks included. It builds in milliseconds from the ``tokenizers`` package
(no transformers import, no model hub).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from lego_rl.data import ABORTED, Generation, Sampling
from lego_rl.kinds import Problem

SPECIAL_TOKENS = [
    "<|im_end|>",
    "<|im_start|>",
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
]

TINY_CHAT_TEMPLATE = (
    "{%- set ns = namespace(first=0) -%}"
    "{%- if tools or messages[0].role == 'system' -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages[0].role == 'system' -%}"
    "{{- messages[0].content -}}{%- set ns.first = 1 -%}"
    "{%- endif -%}"
    "{%- if tools -%}{{- '\\n\\n# Tools\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- '\\n</tools>' -}}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for m in messages[ns.first:] -%}"
    "{%- if m.role == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if m.reasoning_content -%}"
    "{{- '<think>\\n' + m.reasoning_content + '\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{{- m.content or '' -}}"
    "{%- for call in m.tool_calls or [] -%}"
    "{%- if m.content or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{%- set args = call.function.arguments -%}"
    '{{- \'<tool_call>\\n{"name": "\' + call.function.name + \'", "arguments": \' -}}'
    "{{- (args if args is string else args | tojson) + '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif m.role == 'tool' -%}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + m.content -}}"
    "{{- '\\n</tool_response><|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


class TinyChatTokenizer:
    """The slice of a Hugging Face tokenizer the proxy uses, without importing transformers
    (which takes seconds): ``encode``, ``decode``, ``apply_chat_template``, ``eos_token_id``.
    The template is rendered as transformers does (Jinja, trim_blocks, lstrip_blocks, tojson)."""

    def __init__(self, chat_template: str = TINY_CHAT_TEMPLATE):
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers

        alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
        core = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
        core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        core.decoder = decoders.ByteLevel()
        core.add_special_tokens(SPECIAL_TOKENS)
        self.core = self.backend_tokenizer = core
        self.eos_token = SPECIAL_TOKENS[0]
        self.eos_token_id: int = core.token_to_id(self.eos_token)
        self.chat_template = chat_template

    def __len__(self) -> int:
        return self.core.get_vocab_size()

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.core.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False, **_: Any) -> str:
        return self.core.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def apply_chat_template(
        self,
        conversation: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        chat_template: str | None = None,
        tokenize: bool = True,
        add_generation_prompt: bool = False,
        **kwargs: Any,
    ) -> str | list[int]:
        from jinja2 import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise TemplateError(message)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        env.filters["tojson"] = lambda value, indent=None: json.dumps(
            value, ensure_ascii=False, indent=indent
        )
        text = env.from_string(chat_template or self.chat_template).render(
            messages=conversation,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            **kwargs,
        )
        return self.encode(text) if tokenize else text


def tiny_chat_tokenizer() -> TinyChatTokenizer:
    """A byte-level tokenizer (eos ``<|im_end|>``) with :data:`TINY_CHAT_TEMPLATE`."""
    return TinyChatTokenizer()


def tiny_hf_tokenizer() -> Any:
    """The same tokenizer as a transformers ``PreTrainedTokenizerFast`` (imports transformers)."""
    from transformers import PreTrainedTokenizerFast

    tiny = TinyChatTokenizer()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tiny.core,
        eos_token=SPECIAL_TOKENS[0],
        additional_special_tokens=SPECIAL_TOKENS[1:],
    )
    tokenizer.chat_template = TINY_CHAT_TEMPLATE
    return tokenizer


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
