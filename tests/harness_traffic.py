"""Recorded harness traffic (``fixtures/harness-traffic.json``) sent again through a proxy.

Imported by tests/test_proxy_harness_traffic.py and tests/test_proxy_boundary.py (pytest puts
tests/ on sys.path for them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from lego_rl.registry import BuildContext, default_registry
from lego_rl.testing.scripted_inference import scripted_proxy

RECORDED: list[dict[str, Any]] = json.loads((Path(__file__).parent / "fixtures" / "harness-traffic.json").read_text())


@contextmanager
def replayed(recorded: dict[str, Any], replies: Sequence[str] | None = None) -> Iterator[Any]:
    """The proxy session after the harness's recorded requests, answered with ``replies``
    (the recorded ones by default); every request must be answered 200."""
    dialect = default_registry().build("dialect", recorded["dialect"], None, BuildContext())
    _, path = recorded["route"]
    replies = recorded["replies"] if replies is None else replies
    with scripted_proxy({dialect.name: dialect}, replies, max_context=1 << 17) as (server, session, _):
        for body in recorded["requests"]:
            response = httpx.post(
                session.base_url(server.url) + path,
                json=body,
                headers={"authorization": f"Bearer {session.api_key}"},
                timeout=30,
            )
            assert response.status_code == 200, response.text
        yield session
