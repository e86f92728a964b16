"""Render a chat request into prompt token ids, reusing the previous call's tokens verbatim.

The policy's chat template (the tokenizer's own, or a Jinja file/string) turns the
dialect-neutral messages into text. When the decoded text of the previous call's prompt +
completion is a prefix of that text, the new prompt is exactly those previous ids followed
by the tokens of the remaining text: the sampled tokens are never re-tokenized, and the call
"extends" the previous one. Otherwise the whole text is tokenized afresh.
"""

from __future__ import annotations

import json
import sys
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from lego_rl.data import CallRecord
from lego_rl.kinds import ChatMessage, ChatRequest
from lego_rl.proxy.budgets import ByteLRU, MiB
from lego_rl.proxy.errors import BadRequest
from lego_rl.proxy.fast.tokenizer_cache import ChunkCache, Encoder, readable
from lego_rl.proxy.jsonio import check_depth
from lego_rl.proxy.native_templates import template_twin
from lego_rl.token_ids import TokenIds


@dataclass
class RenderedPrompt:
    ids: TokenIds
    extends_previous: bool
    text: str


def load_template(chat_template: str) -> str | None:
    """Jinja source for ``chat_template``: inline Jinja, a template file, or None for a name
    (e.g. "qwen3"), meaning the tokenizer's own template."""
    if "{%" in chat_template or "{{" in chat_template:
        return chat_template
    path = Path(chat_template).expanduser()
    if path.is_file():
        return path.read_text()
    if path.suffix in {".jinja", ".j2"} or "/" in chat_template:
        raise FileNotFoundError(
            f"chat template file {chat_template!r} not found; give an existing Jinja file or a "
            "template name such as 'qwen3' (model.chat_template in the spec)"
        )
    return None


def _template_arguments(arguments: Any) -> Any:
    """Tool-call arguments as templates expect them: a dict when the JSON string parses (and
    nests no deeper than the proxy reads any JSON: :data:`lego_rl.proxy.jsonio.MAX_DEPTH`)."""
    if isinstance(arguments, str):
        try:
            check_depth(arguments)
            parsed = json.loads(arguments)
        except ValueError:  # JSONDecodeError, or nested too deep
            return arguments
        return parsed if isinstance(parsed, dict) else arguments
    return arguments


def template_message(message: ChatMessage) -> dict[str, Any]:
    """A neutral message as a Hugging Face chat template sees it."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.reasoning:
        out["reasoning_content"] = message.reasoning
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.get("id", ""),
                "type": "function",
                "function": {
                    "name": call["function"]["name"],
                    "arguments": _template_arguments(call["function"].get("arguments", {})),
                },
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    if message.name:
        out["name"] = message.name
    return out


def _template_errors() -> tuple[type[Exception], ...]:
    try:
        from jinja2 import TemplateError
    except ImportError:
        return ()
    return (TemplateError,)


_first_renders: weakref.WeakKeyDictionary[Any, set[str | None]] = weakref.WeakKeyDictionary()
"""The templates each live tokenizer has rendered (by the tokenizer itself, not its id: a
freed tokenizer's id is soon another's)."""
_first_render_lock = threading.Lock()


def _rendered(tokenizer: Any, template: str | None) -> bool:
    try:
        return template in _first_renders.get(tokenizer, ())
    except TypeError:  # not weak-referenceable: no first render held back
        return True


def apply_template(
    tokenizer: Any,
    messages: Sequence[ChatMessage],
    tools: list[dict[str, Any]],
    template: str | None,
    generation_prompt: bool,
) -> str:
    """``tokenizer.apply_chat_template`` on neutral messages, as text.

    A tokenizer's first render of a template runs alone: it compiles the Jinja source (~0.25 s
    for Qwen3's), and transformers' compile cache does not hold back concurrent misses, so the
    first calls of sessions that start together would each compile it (seen: 24 compiles, 6 s
    of CPU, when 32 sessions started at once). A template with a registered Python renderer
    (:mod:`lego_rl.proxy.native_templates`) is rendered by it, checked against Jinja."""

    dicts = [template_message(m) for m in messages]

    def render() -> str:
        return tokenizer.apply_chat_template(
            dicts,
            tools=tools or None,
            chat_template=template,
            tokenize=False,
            add_generation_prompt=generation_prompt,
        )

    if not _rendered(tokenizer, template):
        with _first_render_lock:
            if not _rendered(tokenizer, template):
                text = render()
                _first_renders.setdefault(tokenizer, set()).add(template)
                return text
    twin = template_twin(tokenizer, template)
    if twin is None:
        return render()
    return twin.render(dicts, tools or None, generation_prompt, render)


def render_text(tokenizer: Any, request: ChatRequest, template: str | None = None) -> str:
    """The prompt text, ending with the generation prompt of the assistant turn.

    A template that rejects the messages (``raise_exception`` in Jinja) is a BadRequest."""
    try:
        return apply_template(tokenizer, request.messages, request.tools, template, True)
    except _template_errors() as exc:
        raise BadRequest(
            f"the chat template rejected the messages: {exc}", param="messages"
        ) from exc


def encode(tokenizer: Any, text: str) -> list[int]:
    """The ids of ``text`` (of :func:`~lego_rl.proxy.fast.tokenizer_cache.readable` text where it holds a lone
    surrogate, which no tokenizer encodes)."""
    if not text:
        return []
    try:
        return list(tokenizer.encode(text, add_special_tokens=False))
    except (TypeError, UnicodeEncodeError):
        fixed = readable(text)
        if fixed == text:
            raise
        return list(tokenizer.encode(fixed, add_special_tokens=False))


def decode(tokenizer: Any, ids: Sequence[int]) -> str:
    """The text of ``ids``, special tokens kept, no clean-up. A fast tokenizer's Rust core
    decodes them directly: transformers' ``decode`` gives the same text with clean-up off, after
    converting every id in Python first (half its cost on a short reply)."""
    ids = ids.tolist() if isinstance(ids, TokenIds) else list(ids)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return backend.decode(ids, skip_special_tokens=False)
    return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


@dataclass(frozen=True)
class Context:
    """A call's context as the next call may extend it: its prompt and its completion, as text
    and as the exact ids (sampled ids included). The two id sequences are the call's own (not
    copied): a session's history is held once, in its records. The texts are kept apart, not
    joined: joining copies the whole context (~100 KB for Claude Code) on every call."""

    prompt_text: str
    prompt_ids: TokenIds
    completion_text: str
    completion_ids: TokenIds
    _latest: tuple[str | None, int | None] = field(default=(None, None), compare=False, repr=False)

    @property
    def text(self) -> str:
        """Prompt + completion text."""
        return self.prompt_text + self.completion_text

    @property
    def ids(self) -> TokenIds:
        """Prompt + completion ids."""
        return self.prompt_ids + self.completion_ids

    @property
    def length(self) -> int:
        """Characters of prompt + completion text."""
        return len(self.prompt_text) + len(self.completion_text)

    def extent(self, text: str) -> int | None:
        """How much of ``text`` this context explains: :attr:`length` when ``text`` extends the
        prompt and completion, the prompt's length when it extends the prompt alone (a retry, a
        changed echo), else None. The answer for the latest text is remembered: choosing the
        thread and tokenizing ask about the same prompt, and each asking reads it whole."""
        latest, n = self._latest
        if latest is text:
            return n
        n = None
        if text.startswith(self.prompt_text):
            n = len(self.prompt_text)
            if text.startswith(self.completion_text, n):
                n += len(self.completion_text)
        object.__setattr__(self, "_latest", (text, n))
        return n

    def forget(self) -> None:
        """Let go of the latest text asked about (a refused prompt's)."""
        object.__setattr__(self, "_latest", (None, None))

    @classmethod
    def of(cls, tokenizer: Any, record: CallRecord, prompt_text: str | None = None) -> Context:
        """The context a recorded call left; ``prompt_text`` saves decoding the prompt."""
        prompt_text = decode(tokenizer, record.prompt_ids) if prompt_text is None else prompt_text
        return cls(
            prompt_text,
            record.prompt_ids,
            decode(tokenizer, record.completion_ids),
            record.completion_ids,
        )


class PrefixCache:
    """Ids of text tokenized from scratch: the first turn (system prompt + tools), shared by
    every session, then the rest through a :class:`ChunkCache`; deltas through ``encoder``.

    Text is cut right after the first ``marker`` (a special token: tokenizers split special
    tokens out before anything else, so tokenizing the two parts separately gives the same
    ids as tokenizing the whole). Least recently used entries are evicted past ``budget``
    bytes (:mod:`lego_rl.proxy.budgets`; what a failed request added is taken back)."""

    def __init__(self, tokenizer: Any, marker: str = "<|im_end|>", budget: int = 64 * MiB):
        self.tokenizer, self.marker = tokenizer, marker
        self.encoder = Encoder(tokenizer)
        self.chunks = ChunkCache(self.encoder)
        self.entries: ByteLRU[str, TokenIds] = ByteLRU("tokenizer.prefixes", budget)
        self.lock = threading.Lock()
        self._usable: bool | None = None
        self.hits = self.misses = 0

    def usable(self) -> bool:
        if self._usable is None:
            self._usable = len(encode(self.tokenizer, self.marker)) == 1
        return self._usable

    def encode(self, text: str) -> TokenIds:
        at = text.find(self.marker) if self.usable() else -1
        if at < 0:
            return TokenIds(self.chunks.encode(text))
        cut = at + len(self.marker)
        head = text[:cut]
        with self.lock:  # a miss is tokenized once, even when sessions start together
            entry = self.entries.get(head)
            if entry is None:
                self.misses += 1
                ids = TokenIds(self.encoder.encode(head))
                self.entries.put(head, ids, sys.getsizeof(head) + ids.nbytes)
            else:
                self.hits += 1
                ids = entry.value
        return ids + self.chunks.encode(text[cut:])


def render_prompt(
    tokenizer: Any,
    request: ChatRequest,
    previous: Context | None = None,
    template: str | None = None,
    cache: PrefixCache | None = None,
) -> RenderedPrompt:
    """Prompt ids for ``request``. When ``previous`` (prompt + completion) text is a prefix of
    the rendered text, the ids are exactly its ids plus the tokens of the rest: sampled ids are
    never re-tokenized and only the new turn is tokenized. Reusing the prompt alone keeps a
    retried call's ids identical. Otherwise the text is tokenized afresh (through ``cache``)."""
    text = render_text(tokenizer, request, template)
    return tokenize_prompt(tokenizer, text, previous, cache)


def tokenize_prompt(
    tokenizer: Any,
    text: str,
    previous: Context | None = None,
    cache: PrefixCache | None = None,
) -> RenderedPrompt:
    """The tokenizing half of :func:`render_prompt`, for text already rendered."""
    n = previous.extent(text) if previous is not None else None
    if previous is not None and n is not None:
        delta = cache.encoder.encode if cache is not None else partial(encode, tokenizer)
        rest = TokenIds(delta(text[n:]))
        if n == previous.length:
            # One copy of the long prompt: ``a + b + c`` would build and free it twice.
            ids = previous.prompt_ids + (previous.completion_ids + rest)
            return RenderedPrompt(ids, True, text)
        return RenderedPrompt(previous.prompt_ids + rest, False, text)
    ids = cache.encode(text) if cache is not None else TokenIds(encode(tokenizer, text))
    return RenderedPrompt(ids, False, text)
