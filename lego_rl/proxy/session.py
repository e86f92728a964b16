"""One agent's session on the proxy: its secret, its sampling, its calls and errors.

A session may carry several conversations ("threads"): the harness's main agent and the
sub-agents it starts through the same endpoint (Claude Code's Task/Agent tools). Each thread
becomes its own Trajectory; sub-agent ones are flagged.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lego_rl.data import CallRecord, Sampling, Trajectory
from lego_rl.proxy.errors import ProxyError
from lego_rl.proxy.fast.incremental_render import Rendering
from lego_rl.proxy.recorder import assemble, trajectory_metrics
from lego_rl.proxy.render import Context


def new_api_key() -> str:
    return f"sk-legorl-{secrets.token_hex(16)}"


def presents(headers: Mapping[str, str], key: str) -> bool:
    """True when the request presents ``key`` (Bearer or x-api-key), compared in constant time."""
    auth = headers.get("authorization", "")
    presented = auth[7:].strip() if auth[:7].lower() == "bearer " else headers.get("x-api-key", "")
    return hmac.compare_digest(presented.encode(), key.encode())


@dataclass
class Thread:
    """One conversation within a session: the calls of the main agent or of one sub-agent."""

    index: int
    system: str
    """The system prompt that identifies the conversation."""
    subagent: bool
    main: bool = False
    calls: list[CallRecord] = field(default_factory=list)
    rendering: Rendering | None = None
    """The latest request's rendered messages, for the next request to render incrementally."""
    _context: Context | None = field(default=None, repr=False)
    _left: tuple[Any, CallRecord, str] | None = field(default=None, repr=False)

    @property
    def context(self) -> Context | None:
        """What the latest successful call left, for the next call to extend (read and set with
        the session's lock held). A call leaves it with :meth:`leave`; it is worked out here, on
        first use: after the call's reply is sent, or by the next call if that comes first."""
        if self._left is not None:
            self._context, self._left = Context.of(*self._left), None
        return self._context

    @context.setter
    def context(self, value: Context | None) -> None:
        self._context, self._left = value, None

    def settle(self) -> None:
        """Work out the context a call left now (with the session's lock held)."""
        _ = self.context

    def leave(self, tokenizer: Any, record: CallRecord, prompt_text: str) -> None:
        """The context ``record`` leaves (``prompt_text`` rendered its prompt), worked out later."""
        self._left = (tokenizer, record, prompt_text)

    def continues(self, text: str) -> int:
        """How much of ``text`` this thread's context explains (0: none)."""
        return 0 if self.context is None else self.context.extent(text) or 0

    def release(self) -> None:
        """Drop what the thread keeps for a next call (its session closed): the rendering and
        the context's texts; the calls stay."""
        self.rendering, self._context, self._left = None, None, None


@dataclass
class ProxySession:
    """What the proxy knows of one harness run; the engine reads it after the trial."""

    id: str
    dialect: str
    sampling: Sampling
    max_calls: int | None = None
    subagent: bool = False
    small_model: str = ""
    """The harness's small/fast model name; a call naming it is a sub-agent's (when set)."""
    api_key: str = field(default_factory=new_api_key)
    calls: list[CallRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    threads: list[Thread] = field(default_factory=list)
    malformed: dict[int, int] = field(default_factory=dict)
    """Malformed tool calls (kept as text) by call index."""
    rejected: list[str] = field(default_factory=list)
    """Requests answered with an error before reaching the backend (bad input, limits)."""
    started: int = 0
    """Calls that generated or are generating (failed ones are not counted)."""
    next_index: int = 0
    limit_hit: bool = False
    context_overflow: bool = False
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """Guards the session's state; held to render and to record, not while generating."""

    def base_url(self, server_url: str) -> str:
        return f"{server_url.rstrip('/')}/s/{self.id}"

    def authorized(self, headers: Mapping[str, str]) -> bool:
        """True when the request presents this session's key."""
        return presents(headers, self.api_key)

    def reject(self, error: ProxyError) -> None:
        """Note a request answered with ``error`` before it reached the backend."""
        self.rejected.append(f"{error.status} {error.kind}: {error.message}")

    @property
    def last_call(self) -> CallRecord | None:
        """The latest call that produced a generation."""
        return next((c for c in reversed(self.calls) if c.error is None), None)

    @property
    def generations(self) -> int:
        return sum(1 for c in self.calls if c.error is None)

    def refused(self, thread: Thread, opened: bool) -> None:
        """Undo what a prompt refused at ``thread`` left (call with ``lock`` held): the thread,
        when the prompt ``opened`` it, and every context's memo of the prompt's text."""
        if opened and not thread.calls and thread in self.threads:
            self.threads.remove(thread)
        for kept in self.threads:
            if kept._context is not None:
                kept._context.forget()

    def release(self) -> None:
        """Drop what the session's threads keep for a next call (it closed)."""
        for thread in self.threads:
            thread.release()

    def thread_for(self, text: str, system: str, model: str) -> Thread:
        """The conversation a prompt belongs to (call with ``lock`` held).

        The thread whose context the prompt extends (or repeats, for a retry) wins. Otherwise a
        prompt with the main thread's system prompt, not naming the small model, is the main
        agent with a rewritten history (compaction...). Anything else starts a sub-agent."""
        best = max(self.threads, key=lambda t: t.continues(text), default=None)
        if best is not None and best.continues(text):
            return best
        small = bool(self.small_model) and model == self.small_model
        main = self.main_thread
        if not small and (main is None or system == main.system):
            if main is None:
                main = Thread(len(self.threads), system, self.subagent, main=True)
                self.threads.append(main)
            return main
        thread = Thread(len(self.threads), system, True)
        self.threads.append(thread)
        return thread

    @property
    def main_thread(self) -> Thread | None:
        return next((t for t in self.threads if t.main), None)

    def ordered_threads(self) -> list[Thread]:
        """The main thread first, then the sub-agents in order of appearance."""
        return sorted(self.threads, key=lambda t: (not t.main, t.index))

    def _assemble(self, thread: Thread) -> Trajectory:
        return assemble(
            sorted(thread.calls, key=lambda c: c.index),
            self.id if thread.main else f"{self.id}.sub{thread.index}",
            subagent=thread.subagent,
        )

    def trajectories(self) -> list[Trajectory]:
        """One trajectory per thread, the main agent's first."""
        return [self._assemble(t) for t in self.ordered_threads()]

    def trajectory(self) -> Trajectory:
        """The main agent's trajectory."""
        main = self.main_thread
        if main is None:
            return Trajectory(session=self.id, subagent=self.subagent)
        return self._assemble(main)

    def metrics(self) -> list[dict[str, float]]:
        """Per trajectory: segments, calls, trained tokens, sampled share, rewrites, rollbacks."""
        return [
            trajectory_metrics(
                trajectory,
                thread.calls,
                malformed=sum(self.malformed.get(c.index, 0) for c in thread.calls),
            )
            for thread, trajectory in zip(self.ordered_threads(), self.trajectories(), strict=True)
        ]
