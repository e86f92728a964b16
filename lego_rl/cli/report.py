"""``legorl report RUN_DIR``: write the run's report (report.json, report.md, reward curve PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lego_rl.cli.common import err, escape, out


def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory of `legorl apply`.")],
) -> None:
    """Write RUN_DIR/report/ from the run's store and print its headline numbers."""
    from lego_rl.observe.report import HEADLINE, fmt, read_report, split_text
    from lego_rl.observe.report import write_report as write

    try:
        path = write(run_dir)
    except FileNotFoundError as exc:
        err.print(f"[red]✗[/red] {escape(str(exc))}: give a run directory of `legorl apply`")
        raise typer.Exit(1) from None
    figures = read_report(run_dir) or {}
    out.print(f"[green]✓[/green] wrote {escape(str(path))}")
    for key in HEADLINE:
        out.print(f"  {key:18s} {fmt(figures.get(key))}")
    out.print(f"  time per step (s) {split_text(figures.get('time_split', {}).get('mean', {}))}")
