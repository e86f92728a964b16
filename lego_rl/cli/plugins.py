"""``legorl plugins``: every installed plugin."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from lego_rl.cli.common import escape, out, registry, reports_errors


@reports_errors
def plugins(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List installed plugins: kind, name, distribution, version, what it does."""
    infos = registry().all()
    if as_json:
        typer.echo(json.dumps([p.as_dict() for p in infos], indent=2))
        return
    table = Table(title=f"{len(infos)} installed plugins", title_justify="left")
    for column in ("kind", "name", "distribution", "version", "doc"):
        table.add_column(column)
    for p in infos:
        table.add_row(*(escape(v) for v in (p.kind, p.name, p.distribution, p.version, p.doc)))
    out.print(table)
