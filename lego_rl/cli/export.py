"""``legorl export RUN_DIR... -o run.html``: one self-contained HTML file for sharing."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lego_rl.cli.common import err, escape, out


def export(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="Run directories (or a directory of runs).")
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write.")] = Path(
        "run.html"
    ),
) -> None:
    """Write the dashboard of runs, data included, to one HTML file that needs no server."""
    from lego_rl.observe.export import export_html

    try:
        path = export_html(run_dirs, output)
    except FileNotFoundError as exc:
        err.print(f"[red]✗[/red] {escape(str(exc))}: give a run directory of `legorl apply`")
        raise typer.Exit(1) from None
    out.print(f"[green]✓[/green] wrote {escape(str(path))} ({path.stat().st_size // 1024} KiB)")
