"""``legorl dashboard [RUN_DIR...]``: serve the live dashboard of one or more runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lego_rl.cli.common import err, escape, out


def dashboard(
    run_dirs: Annotated[
        list[Path] | None,
        typer.Argument(help="Run directories, or a directory of runs (default: runs)."),
    ] = None,
    host: Annotated[
        str, typer.Option(help="Interface to bind; other than 127.0.0.1 needs --token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="LEGORL_DASHBOARD_TOKEN", help="Access token required by every request."
        ),
    ] = None,
    export: Annotated[
        Path | None,
        typer.Option("--export", help="Write a self-contained HTML file instead of serving."),
    ] = None,
) -> None:
    """Serve a read-only, live-updating dashboard of run stores (store.sqlite)."""
    from lego_rl.observe.reader import find_runs

    paths = run_dirs or [Path("runs")]
    if not find_runs(paths):
        err.print(
            f"[red]✗[/red] no run store (store.sqlite) in {escape(', '.join(map(str, paths)))}: "
            "give a run directory of `legorl apply` or a directory that holds runs"
        )
        raise typer.Exit(1)
    if export is not None:
        from lego_rl.observe.export import export_html

        out.print(f"[green]✓[/green] wrote {escape(str(export_html(paths, export)))}")
        return
    import uvicorn

    from lego_rl.observe.server import check_bind, create_app

    try:
        check_bind(host, token)
    except ValueError as exc:
        err.print(f"[red]✗[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    query = f"?token={token}" if token else ""
    out.print(f"dashboard of {escape(', '.join(map(str, paths)))}: http://{host}:{port}/{query}")
    uvicorn.run(create_app(paths, token), host=host, port=port, log_level="warning")
