"""A tiny offline chat tokenizer for benchmarks and tests.

Byte-level (one token per byte, no merges) with the Qwen3 special tokens and a small chat
template of the same ``<|im_start|>role ... <|im_end|>`` shape, tools and
``<tool_call>`` blocks included. It builds in milliseconds from the ``tokenizers`` package
(no transformers import, no model hub).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

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
