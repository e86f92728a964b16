"""The ``dashboard`` observer: serves the live dashboard of the run while ``legorl apply`` runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from lego_rl.kinds import Event, Problem
from lego_rl.registry import BuildContext

if TYPE_CHECKING:
    from lego_rl.observe.server import DashboardServer


class DashboardOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = Field(
        "127.0.0.1", description="Interface to bind; any other than localhost needs a token."
    )
    port: int = Field(8765, description="Port to serve on (a free one is used when it is taken).")
    token: str | None = Field(
        None, description="Access token every request must carry (?token=...)."
    )


class DashboardObserver:
    """Starts the read-only dashboard server on the first event, stops it when the run ends."""

    def __init__(self, options: DashboardOptions, run_dir: Path):
        self.options, self.run_dir = options, run_dir
        self.server: DashboardServer | None = None

    @property
    def url(self) -> str | None:
        """Where the dashboard serves (None until the store exists)."""
        return self.server.url if self.server is not None else None

    def preflight(self) -> list[Problem]:
        from lego_rl.observe.server import check_bind

        try:
            check_bind(self.options.host, self.options.token)
        except ValueError as exc:
            return [Problem(str(exc), "set observe options.token, or host: 127.0.0.1")]
        return []

    def emit(self, event: Event) -> None:
        if self.server is None and (self.run_dir / "store.sqlite").exists():
            from lego_rl.observe.server import DashboardServer

            self.server = DashboardServer(
                [self.run_dir], self.options.host, self.options.port, self.options.token
            )
            print(f"dashboard: {self.server.start()}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def dashboard(options: DashboardOptions, ctx: BuildContext) -> DashboardObserver:
    """Serve the run's live dashboard (reads the store the `store` observer writes)."""
    if ctx.run_dir is None:
        raise ValueError("the dashboard observer needs a run directory")
    return DashboardObserver(options, ctx.run_dir)
