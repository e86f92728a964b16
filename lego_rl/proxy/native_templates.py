"""Chat templates rendered in plain Python, checked against Jinja.

Rendering through Jinja costs ~20 us of set-up and ~20 us a message (hot; 4-5x that on a call
that wakes an idle CPU): for a turn's two new messages, more than parsing the request or
tokenizing the turn. A plugin that ships a template may register a Python renderer for its
exact source (:func:`register_native_template`); the proxy then renders with it, compares it
with Jinja on the first ``verify_first`` renders and every ``check_every``-th after, and one
disagreement sends that tokenizer's renders back to Jinja for good. A renderer returns None for
input it does not take, which Jinja renders.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from lego_rl.proxy.fast.tokenizer_cache import SpotCheck

NativeRender = Callable[[Sequence[dict[str, Any]], Sequence[dict[str, Any]] | None, bool], str | None]
"""(Hugging Face chat messages, tools or None, add_generation_prompt) -> text, or None."""

_registered: dict[str, NativeRender] = {}
_twins: dict[tuple[int, str], TemplateTwin] = {}
_lock = threading.Lock()


def register_native_template(source: str, render: NativeRender) -> None:
    """Render the Jinja template ``source`` (its exact text) with ``render`` from now on."""
    with _lock:
        _registered[source] = render


class TemplateTwin:
    """A registered renderer for one tokenizer's template, kept honest by a :class:`SpotCheck`."""

    def __init__(self, render: NativeRender, *, verify_first: int = 8, check_every: int = 128):
        self.native = render
        self.check: SpotCheck[str] = SpotCheck(verify_first, check_every, uses="renders")
        self.counts = self.check.counts

    def render(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None,
        add_generation_prompt: bool,
        exact: Callable[[], str],
    ) -> str:
        """The native text (``exact()``'s when a check is due, it is off, or it declines)."""
        text = self.native(messages, tools, add_generation_prompt) if self.check.on else None
        return exact() if text is None else self.check.run(text, exact)


def template_twin(tokenizer: Any, template: str | None) -> TemplateTwin | None:
    """The twin of ``template`` (None: the tokenizer's own) for ``tokenizer``, if registered."""
    source = template if template is not None else getattr(tokenizer, "chat_template", None)
    if not isinstance(source, str):
        return None
    key = (id(tokenizer), source)
    twin = _twins.get(key)
    if twin is None:
        render = _registered.get(source)
        if render is None:
            return None
        with _lock:
            twin = _twins.setdefault(key, TemplateTwin(render))
    return twin
