"""The proxy's fast paths give exactly what the plain paths give: the tiktoken twin, the direct backend encoder,
the chunk cache for text tokenized from scratch, contexts that share the records' ids, the
one-render incremental step, and orjson in and out."""

import json

import pytest

from lego_rl.data import CallRecord
from lego_rl.kinds import ChatMessage, ChatRequest
from lego_rl.proxy import jsonio
from lego_rl.proxy.fast.incremental_render import IncrementalRenderer
from lego_rl.proxy.fast.tokenizer_cache import PROBE, ChunkCache, Encoder, pieces
from lego_rl.proxy.render import (
    Context,
    PrefixCache,
    encode,
    render_text,
    tokenize_prompt,
)
from lego_rl.tiny_tokenizer import TinyChatTokenizer, tiny_chat_tokenizer, tiny_hf_tokenizer

REMINDER = "<system-reminder>\n" + "Context about the repository.\n" * 40 + "</system-reminder>\n"


def first_turn(task: str) -> str:
    system = "<|im_start|>system\n" + "A long system prompt. " * 60 + "<|im_end|>\n"
    return f"{system}<|im_start|>user\n{REMINDER}{task}<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def qwen3():
    embedded = pytest.importorskip("legorl_embedded.policy.tokenizer")
    return embedded.load_tokenizer("qwen3")


TEXTS = [
    first_turn("Fix bug 1."),
    "def f(x):\n    return x  # trailing  \n\n\n  indented\n\tTab\nWörter 中文 1234567 !!!\n" * 20,
    "-rw-r--r-- 1 root root 1234 file.py\n" * 50 + "café\u0301\n\u0301combining after break\n",
    "no line breaks at all " * 60,
]


@pytest.mark.parametrize("which", ["tiny", "qwen3"])
def test_chunked_and_direct_encoding_equal_the_plain_tokenizer(which, request):
    tok = tiny_chat_tokenizer() if which == "tiny" else request.getfixturevalue("qwen3")
    encoder = Encoder(tok)
    encoder._twin = None  # the direct path is the one under test (the twin has its own tests)
    assert encoder._backend is not None
    chunks = ChunkCache(encoder, min_chars=64, verify_first=0, check_every=0)
    assert chunks.usable
    for text in TEXTS + [PROBE]:
        plain = list(tok.encode(text, add_special_tokens=False))
        assert encoder.encode(text) == plain
        assert chunks.encode(text) == plain
        assert chunks.encode(text) == plain  # served from the cache the second time
    assert chunks.counts["hits"] > 0 and chunks.counts["mismatches"] == 0


def test_sessions_share_the_first_message_pieces_and_ids_stay_exact():
    tok = tiny_chat_tokenizer()
    cache = PrefixCache(tok)
    first = cache.encode(first_turn("Fix bug 1."))
    hits = cache.chunks.counts["hits"]
    second = first_turn("Fix bug 2.")
    assert list(cache.encode(second)) == encode(tok, second)
    assert list(first) == encode(tok, first_turn("Fix bug 1."))
    assert cache.chunks.counts["hits"] > hits  # the reminder came from the cache
    assert (cache.hits, cache.misses) == (1, 1)  # system prompt: one miss, then a hit


def test_pieces_cut_only_after_a_line_break_before_non_space():
    text = "a\n  b\nc\n\n d\ne"
    parts = pieces(text, 1)
    assert "".join(parts) == text
    assert parts == ["a\n  b\n", "c\n\n d\n", "e"]


class PrefixedTokenizer(TinyChatTokenizer):
    """Marks the start of every encoded text (as SentencePiece's leading space does): cutting
    text into pieces changes its ids."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [0, *super().encode(text)]


class MergesAcrossBreaks(TinyChatTokenizer):
    """Joins a line break with a following '@' into one id: fine on the probe text, wrong on
    text that has it."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        out = super().encode(text.replace("\n@", "\x00"))
        zero = super().encode("\x00")[0]
        return [999 if i == zero else i for i in out]


def test_a_tokenizer_that_is_not_cut_safe_turns_chunking_off():
    tok = PrefixedTokenizer()
    tok.backend_tokenizer = None  # only its own encode knows the prefix
    chunks = ChunkCache(Encoder(tok), min_chars=8)
    assert not chunks.usable
    text = "line one\nline two\n" * 10
    assert chunks.encode(text) == tok.encode(text)


def test_a_disagreement_on_real_text_is_caught_and_the_plain_ids_returned():
    tok = MergesAcrossBreaks()
    tok.backend_tokenizer = None
    chunks = ChunkCache(Encoder(tok), min_chars=8, verify_first=2, check_every=0)
    assert chunks.usable  # the probe has no "\n@"
    text = "first line\n@second line\n" * 10
    assert chunks.encode(text) == tok.encode(text)
    assert chunks.counts["mismatches"] == 1 and not chunks.usable
    assert chunks.encode(text) == tok.encode(text)


def test_the_direct_encoder_ignores_truncation_left_on_the_backend():
    tok = tiny_hf_tokenizer()
    tok.backend_tokenizer.enable_truncation(5)
    text = "a text much longer than five tokens"
    assert Encoder(tok).encode(text) == tok.encode(text, add_special_tokens=False)
    assert len(Encoder(tok).encode(text)) == len(text)


PIECES = [
    "a", "Z", "hello", " world", "DON'T", "'s", "'LL", "we're", "0", "42", "3.14", "1234567",
    " ", "  ", "\t", "\n", "\r\n", "\n\n\n", "\u00a0", "\u3000", "!", "?!", "-->", "{\"k\": [1]}",
    "中文", "한국어", "Wörter", "e\u0301", "\u212b", "A\u030a", "\U0001f600", "\u0301", "ﬁ",
    "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "<|endoftext|>", "<|im",
]


def test_the_tiktoken_twin_gives_the_tokenizers_ids_on_mixed_text(qwen3):
    import random

    rng = random.Random(7)
    encoder = Encoder(qwen3, verify_first=0, check_every=0)
    assert encoder.twin
    texts = TEXTS + ["".join(rng.choices(PIECES, k=rng.randint(1, 80))) for _ in range(400)]
    for text in texts:
        assert encoder.encode(text) == list(qwen3.encode(text, add_special_tokens=False)), text
    assert encoder.counts["mismatches"] == 0 and encoder.counts["twin"] == len(texts)


def test_a_twin_that_disagrees_on_real_text_is_turned_off(qwen3):
    encoder = Encoder(qwen3, verify_first=1, check_every=0)
    assert encoder.twin
    encoder._twin = lambda text: [0]  # a twin wrong on what the probes did not cover
    text = "a text the probes did not cover"
    plain = list(qwen3.encode(text, add_special_tokens=False))
    assert encoder.encode(text) == plain
    assert encoder.counts["mismatches"] == 1 and not encoder.twin
    assert encoder.encode(text) == plain


def test_tokenizers_tiktoken_cannot_reproduce_get_no_twin():
    from lego_rl.proxy.fast.tiktoken_twin import _verbatim, tiktoken_twin

    assert tiktoken_twin(tiny_hf_tokenizer()) is None  # not byte-level BPE
    assert tiktoken_twin(tiny_chat_tokenizer()) is None  # not a transformers tokenizer
    token = {"normalized": False, "lstrip": False, "rstrip": False, "single_word": False}
    assert _verbatim([token | {"content": "<a>", "id": 1}]) == {"<a>": 1}
    assert _verbatim([token | {"content": "<a>", "id": 1}, token | {"content": "<a>b", "id": 2}]) is None
    assert _verbatim([token | {"content": "<a>", "id": 1, "lstrip": True}]) is None


def record(prompt: list[int], completion: list[int]) -> CallRecord:
    return CallRecord(
        session="s", index=0, dialect="d", prompt_ids=prompt, completion_ids=completion,
        logprobs=[-0.1] * len(completion),
    )


def test_context_shares_the_record_ids_and_extending_it_copies_nothing_back():
    tok = tiny_chat_tokenizer()
    prompt_text = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    call = record(encode(tok, prompt_text), encode(tok, "hello<|im_end|>"))
    before = (tuple(call.prompt_ids), tuple(call.completion_ids))
    context = Context.of(tok, call, prompt_text)
    assert context.prompt_ids is call.prompt_ids
    assert context.completion_ids is call.completion_ids
    assert context.ids == call.prompt_ids + call.completion_ids
    later = context.text + "\n<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\n"
    rendered = tokenize_prompt(tok, later, context, PrefixCache(tok))
    assert rendered.extends_previous
    assert list(rendered.ids) == [*context.ids, *encode(tok, later[len(context.text) :])]
    assert (call.prompt_ids, call.completion_ids) == before  # the record is untouched


def qwen3_like() -> TinyChatTokenizer:
    return TinyChatTokenizer(pytest.importorskip("legorl_embedded.policy.chat_template").source())


def tool_step(i: int) -> list[ChatMessage]:
    args = json.dumps({"command": f"ls {i}"})
    call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": args}}
    return [
        ChatMessage("assistant", "", tool_calls=[call]),
        ChatMessage("tool", f"out {i}", tool_call_id=f"c{i}"),
    ]


def test_an_incremental_step_takes_one_render_and_equals_the_full_render():
    tok = qwen3_like()
    renderer = IncrementalRenderer(tok, None, check_every=1)  # every step checked in full
    messages = [ChatMessage("system", "sys"), ChatMessage("user", "task")]
    rendering, renders = None, []
    original = renderer._render
    renderer._render = lambda *a, **k: (renders.append(1), original(*a, **k))[1]
    for i in range(6):
        request = ChatRequest(messages=list(messages))
        renders.clear()
        text, rendering = renderer.render(request, [rendering])
        assert text == render_text(tok, request, None)
        if i >= 2:  # the block the previous step added is known: one window render
            assert len(renders) == 1 and rendering.block is not None
        messages += tool_step(i)
    assert renderer.counts["mismatches"] == 0


def test_new_messages_render_on_their_own_unless_their_kind_needs_the_known_text():
    tok = qwen3_like()
    renderer = IncrementalRenderer(tok, None, check_every=1)  # every step checked in full
    windows: list[int] = []
    original = renderer._render
    renderer._render = lambda messages, *a, **k: (windows.append(len(messages)), original(messages, *a, **k))[1]
    messages = [ChatMessage("system", "sys"), ChatMessage("user", "task")]
    rendering = None

    def step(added: list[ChatMessage]) -> str:
        nonlocal rendering, messages
        messages = messages + added
        request = ChatRequest(messages=list(messages))
        windows.clear()
        text, rendering = renderer.render(request, [rendering])
        assert text == render_text(tok, request, None)
        return text

    step([])
    for i in range(3):
        step(tool_step(i))
        assert windows == [2]  # the assistant turn and its tool result, alone
    # A second tool result sent after the first: Qwen3 joins consecutive results into one
    # user block, so rendered alone it opens a block of its own; the check catches that once,
    # then such steps take the window with the known text.
    extra = [ChatMessage("tool", "late output", tool_call_id="c2")]
    step(extra)
    assert renderer.counts["mismatches"] == 1
    step([*tool_step(3), ChatMessage("tool", "more", tool_call_id="c3")])
    step([ChatMessage("tool", "again", tool_call_id="c3")])
    assert windows[0] > 1 and renderer.counts["mismatches"] == 1


def test_a_rewritten_history_is_rendered_in_full_not_from_the_cached_block():
    tok = qwen3_like()
    renderer = IncrementalRenderer(tok, None, check_every=0)
    messages = [ChatMessage("system", "sys"), ChatMessage("user", "task")]
    rendering = None
    for i in range(3):
        _, rendering = renderer.render(ChatRequest(messages=list(messages)), [rendering])
        messages += tool_step(i)
    rewritten = [messages[0], ChatMessage("user", "summary of the work so far"), *tool_step(9)]
    full = renderer.counts["full"]
    text, fresh = renderer.render(ChatRequest(messages=rewritten), [rendering])
    assert text == render_text(tok, ChatRequest(messages=rewritten), None)
    assert renderer.counts["full"] == full + 1 and fresh is not None and fresh.block is None


def test_json_out_means_what_the_standard_library_writes():
    value = {"text": "héllo ✓", "big": 2**70, "list": [1, 2.5, None, True], "n": {"x": -3}}
    assert json.loads(jsonio.dumps(value)) == value  # 2**70 falls back to json, exactly
    assert jsonio.dumps({"é": 1}) == '{"é":1}'.encode()
    assert jsonio.dumps({1: "a"}) == b'{"1":"a"}'


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": [1, -2, 3.5, -0.0, 1e300, true, null], "s": "h\\u00e9llo \xe2\x9c\x93", "a": 2}',
        b'{"big": 1180591620717411303424, "low": -9223372036854775809, "u64": 18446744073709551615}',
        b'{"text": "order 12345678901234567890 shipped", "n": 1}',  # a long run inside a string
        b'{"lone": "\\ud800 surrogate"}',  # orjson refuses it, json keeps it
        '{"utf16": "text"}'.encode("utf-16"),
        b'{"inf": 1e400}',
    ],
)
def test_json_in_reads_what_the_standard_library_reads(raw):
    expected = json.loads(raw)
    got = jsonio.loads(raw)
    assert got == expected and repr(got) == repr(expected)  # repr tells 1 from 1.0 and True


@pytest.mark.parametrize("raw", [b'{"t": NaN}', b"[Infinity]", b"{not json", b"\xff\xfe\x00"])
def test_json_in_refuses_what_is_not_json(raw):
    with pytest.raises(ValueError):
        jsonio.loads(raw)


def test_sessions_that_start_together_render_a_template_for_the_first_time_one_at_a_time():
    import threading
    import time

    from lego_rl.proxy.render import apply_template

    class Timed:
        """Records when each render starts and ends (a first render compiles the template)."""

        def __init__(self) -> None:
            self.spans: list[tuple[float, float]] = []
            self.lock = threading.Lock()

        def apply_chat_template(self, messages, **kwargs) -> str:
            start = time.monotonic()
            time.sleep(0.2)
            with self.lock:
                self.spans.append((start, time.monotonic()))
            return "text"

    def together(tok: Timed, n: int) -> list[tuple[float, float]]:
        message = [ChatMessage(role="user", content="hi")]
        threads = [
            threading.Thread(target=apply_template, args=(tok, message, [], None, True))
            for _ in range(n)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sorted(tok.spans)

    tok = Timed()
    first, *rest = together(tok, 6)
    assert len(rest) == 5 and all(start >= first[1] for start, _ in rest)  # the first ran alone
    assert max(s for s, _ in rest) < min(e for _, e in rest)  # the others ran together
    tok.spans.clear()
    spans = together(tok, 4)  # compiled: all at once
    assert max(s for s, _ in spans) < min(e for _, e in spans)


def test_context_extent_tells_an_extension_a_retry_and_a_new_history_apart():
    tok = tiny_chat_tokenizer()
    prompt_text = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    context = Context.of(tok, record(encode(tok, prompt_text), encode(tok, "hello<|im_end|>")), prompt_text)
    assert context.completion_text == "hello<|im_end|>" and context.text == prompt_text + "hello<|im_end|>"
    later = context.text + "\n<|im_start|>user\nmore"
    assert context.extent(later) == context.length == len(context.text)
    assert context._latest == (later, context.length)  # the thread lookup and the tokenizer share it
    assert context.extent(prompt_text + "bye") == len(prompt_text)  # the echo changed
    assert context.extent(prompt_text) == len(prompt_text)  # a retry
    assert context.extent("<|im_start|>system\nnew") is None
    empty = Context.of(tok, record(encode(tok, prompt_text), []), prompt_text)
    assert empty.extent(prompt_text + "x") == empty.length  # nothing sampled: it extends
