"""Render a growing conversation through the chat template without re-rendering its history.

A harness re-sends its whole history on every call, so rendering it in full costs time that
grows with the conversation. When a request's messages extend those of an earlier rendering
(same tools, the earlier messages equal), its text is that rendering followed by what the new
messages add. The addition comes first from rendering the new messages on their own; for a kind
of step where that is not what the full render gives (a template that joins consecutive tool
results, or renders a message by its position), from a window that also takes the last known
message(s), cut off again by their known text.

Both shortcuts assume the template renders each message from its neighbours only. Templates may
not (a message can depend on what follows it, or on the whole conversation), so a shortcut is
checked against the full render once for each kind of step, and again every ``check_every``
steps. A step's kind is the shortcut, the shapes (role, content/reasoning/tool calls present) of
the rendered messages and of the last known one, the set of shapes already in the conversation,
and whether there are a system prompt and tools. A kind whose new messages do not render on
their own takes the window; a window kind that ever disagrees is rendered in full from then on,
and so is a window the template rejects or renders inconsistently.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lego_rl.kinds import ChatMessage, ChatRequest
from lego_rl.proxy.render import apply_template, render_text

Shape = tuple[str, bool, bool, int]


def shape(message: ChatMessage) -> Shape:
    """What of a message a template is likely to branch on."""
    return (message.role, bool(message.content), bool(message.reasoning), len(message.tool_calls))


@dataclass(frozen=True)
class Rendering:
    """A rendered conversation a later request may extend."""

    messages: list[ChatMessage]
    tools: list[dict[str, Any]]
    text: str
    """The full render without the generation prompt."""
    shapes: frozenset[Shape]
    block: tuple[int, int] | None = None
    """(index of the first message the latest step added, where its text starts in ``text``):
    the next step's window can start there with its head text known, saving a render."""


class IncrementalRenderer:
    """Renders requests, extending an earlier :class:`Rendering` where the check allows."""

    def __init__(
        self, tokenizer: Any, template: str | None = None, check_every: int = 64, reach: int = 4
    ):
        self.tokenizer, self.template, self.check_every = tokenizer, template, check_every
        self.reach = reach
        """How many known messages a window may take (consecutive tool results render as one
        block, so the window reaches back to a message that renders alone)."""
        self.verdicts: dict[tuple[Any, ...], bool] = {}
        self.cut_edges: set[tuple[Shape | None, Shape]] = set()
        """(shape before, shape of) a block's first message where a window may not start."""
        self.generation_prompt: str | None = None
        self.usable = True
        self.lock = threading.Lock()
        self.counts = {"full": 0, "incremental": 0, "checks": 0, "mismatches": 0}

    def _render(self, messages: list[ChatMessage], tools: list[dict[str, Any]], gen: bool) -> str:
        if gen:
            request = ChatRequest(messages=messages, tools=tools)
            return render_text(self.tokenizer, request, self.template)
        return apply_template(self.tokenizer, messages, tools, self.template, False)

    def full(self, request: ChatRequest) -> tuple[str, Rendering | None]:
        """The full render (with generation prompt) and the Rendering it leaves, if any."""
        text = render_text(self.tokenizer, request, self.template)
        with self.lock:
            self.counts["full"] += 1
        prompt = self._generation_prompt(request, text)
        if prompt is None or not text.endswith(prompt):
            return text, None
        shapes = frozenset(shape(m) for m in request.messages)
        base = text[: len(text) - len(prompt)]
        return text, Rendering(list(request.messages), request.tools, base, shapes)

    def _generation_prompt(self, request: ChatRequest, text: str) -> str | None:
        """The text a generation prompt appends; checked once on a real request (a template
        whose prompt is not a plain suffix disables incremental rendering)."""
        if not self.usable:
            return None
        if self.generation_prompt is None:
            try:
                plain = self._render(request.messages, request.tools, gen=False)
            except Exception:  # noqa: BLE001 - such a template is rendered in full
                plain = None
            with self.lock:
                if plain is None or not text.startswith(plain):
                    self.usable = False
                    return None
                self.generation_prompt = text[len(plain) :]
        return self.generation_prompt

    def render(
        self, request: ChatRequest, earlier: Iterable[Rendering | None] = ()
    ) -> tuple[str, Rendering | None]:
        """The prompt text of ``request`` (generation prompt included) and its Rendering."""
        messages = request.messages
        known = None
        for rendering in earlier:
            if (
                rendering is not None
                and len(messages) >= len(rendering.messages) > 0
                and (known is None or len(rendering.messages) > len(known.messages))
                and rendering.tools == request.tools
                and messages[: len(rendering.messages)] == rendering.messages
            ):
                known = rendering
        if known is None or self.generation_prompt is None or not self.usable:
            return self.full(request)
        n = len(known.messages)
        if n == len(messages):  # the same conversation again (a retry)
            return known.text + self.generation_prompt, known
        common = (
            messages[0].role == "system",
            bool(request.tools),
            known.shapes,
            shape(known.messages[-1]),
        )
        alone = ("alone", *common, tuple(shape(m) for m in messages[n:]))
        kind, found = alone, None
        if self.verdicts.get(alone) is not False:
            found = self._alone(known, messages)
        if found is None:  # this kind of step needs the known text before it
            found = self._from_block(known, messages) or self._window(known, messages)
            kind = ("window", *common, tuple(shape(m) for m in found[0])) if found else alone
        if found is None or self.verdicts.get(kind) is False:
            return self.full(request)
        _, head, whole = found
        shapes = known.shapes | {shape(m) for m in messages[n:]}
        base = known.text + whole[len(head) :]
        text = base + self.generation_prompt
        with self.lock:
            self.counts["incremental"] += 1
            due = self.check_every > 0 and self.counts["incremental"] % self.check_every == 0
        if kind not in self.verdicts or due:
            agrees = render_text(self.tokenizer, request, self.template) == text
            with self.lock:
                self.counts["checks"] += 1
                self.verdicts[kind] = agrees
                self.counts["mismatches"] += not agrees
            if not agrees:
                return self.full(request)
        block = (n, len(known.text))
        return text, Rendering(list(messages), request.tools, base, shapes, block)

    def _alone(
        self, known: Rendering, messages: list[ChatMessage]
    ) -> tuple[list[ChatMessage], str, str] | None:
        """(window, head, window's render) for the new messages rendered on their own (the
        cheapest step: right for templates that render a message without its neighbours,
        which the kind's check decides). None when the template rejects them alone."""
        added = messages[len(known.messages) :]
        try:
            return added, "", self._render(added, [], gen=False)
        except Exception:  # noqa: BLE001 - the full render reports template errors
            return None

    def _from_block(
        self, known: Rendering, messages: list[ChatMessage]
    ) -> tuple[list[ChatMessage], str, str] | None:
        """(window, head, window's render) from the block ``known``'s step added, whose text
        is known: one render. None when there is none or the window's render does not start
        with it."""
        if known.block is None:
            return None
        start, at = known.block
        edge = (shape(messages[start - 1]) if start else None, shape(messages[start]))
        if edge in self.cut_edges:
            return None
        head = known.text[at:]
        try:
            whole = self._render(messages[start:], [], gen=False)
        except Exception:  # noqa: BLE001 - the full render reports template errors
            return None
        if head and whole.startswith(head):
            return messages[start:], head, whole
        with self.lock:  # this template renders such a message differently on its own
            self.cut_edges.add(edge)
        return None

    def _window(
        self, known: Rendering, messages: list[ChatMessage]
    ) -> tuple[list[ChatMessage], str, str] | None:
        """(window, head, window's render) reaching back from the last known message to one
        whose render alone ends ``known.text``: two renders. None when none does."""
        n = len(known.messages)
        for start in range(n - 1, max(n - 1 - self.reach, -1), -1):
            try:
                head = self._render(messages[start:n], [], gen=False)
            except Exception:  # noqa: BLE001 - the full render reports template errors
                return None
            if head and known.text.endswith(head):
                break
        else:
            return None
        try:
            whole = self._render(messages[start:], [], gen=False)
        except Exception:  # noqa: BLE001 - the full render reports template errors
            return None
        return (messages[start:], head, whole) if whole.startswith(head) else None
