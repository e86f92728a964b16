"""One agent's session on the proxy: its secret, its sampling, its calls and errors."""

from __future__ import annotations

import hmac
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from lego_rl.data import CallRecord, Sampling, Trajectory
from lego_rl.proxy.recorder import assemble


@dataclass
class ProxySession:
    """What the proxy knows of one harness run; the engine reads it after the trial."""

    id: str
    dialect: str
    sampling: Sampling
    max_calls: int | None = None
    subagent: bool = False
    api_key: str = field(default_factory=lambda: f"sk-legorl-{secrets.token_hex(16)}")
    calls: list[CallRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    limit_hit: bool = False
    context_overflow: bool = False
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """Serialises this session's calls, so each call renders against the one before it."""

    def base_url(self, server_url: str) -> str:
        return f"{server_url.rstrip('/')}/s/{self.id}"

    def authorized(self, headers: Mapping[str, str]) -> bool:
        """True when the request presents this session's key (Bearer or x-api-key)."""
        auth = headers.get("authorization", "")
        presented = (
            auth[7:].strip() if auth[:7].lower() == "bearer " else headers.get("x-api-key", "")
        )
        return hmac.compare_digest(presented.encode(), self.api_key.encode())

    @property
    def last_call(self) -> CallRecord | None:
        """The latest call that produced a generation."""
        return next((c for c in reversed(self.calls) if c.error is None), None)

    @property
    def generations(self) -> int:
        return sum(1 for c in self.calls if c.error is None)

    def trajectory(self) -> Trajectory:
        return assemble(list(self.calls), self.id, subagent=self.subagent)
