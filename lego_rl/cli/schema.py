"""``legorl schema``: write or check schemas/spec.schema.json."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated

import typer

from lego_rl.cli.common import EXIT_NOT_READY, err, escape, out, registry, reports_errors
from lego_rl.spec.schema import SCHEMA_PATH, dumps, first_party, spec_schema

_DIFF_LINES = 40


@reports_errors
def schema(
    check: Annotated[
        bool, typer.Option("--check", help="Exit 1 if the file differs from what would be written.")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help=f"Where to write (default {SCHEMA_PATH}).", metavar="PATH"
        ),
    ] = None,
    installed: Annotated[
        bool,
        typer.Option(
            "--installed",
            help="Include every installed plugin, third parties too; print unless --output.",
        ),
    ] = False,
) -> None:
    """Generate the spec's JSON Schema (draft 2020-12) with the options of known plugins."""
    include = (lambda _info: True) if installed else first_party
    text = dumps(spec_schema(registry(), include))
    if installed and output is None and not check:
        typer.echo(text, nl=False)
        return
    path = output or SCHEMA_PATH
    if check:
        _check(path, text, "legorl schema" + (f" --output {path}" if output else ""))
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    out.print(f"[green]✓[/green] wrote {escape(str(path))}")


def _check(path: Path, text: str, command: str) -> None:
    current = path.read_text() if path.is_file() else ""
    if current == text:
        out.print(f"[green]✓[/green] {escape(str(path))} is up to date")
        return
    diff = list(
        difflib.unified_diff(
            current.splitlines(),
            text.splitlines(),
            f"{path} (committed)",
            f"{path} (generated)",
            lineterm="",
        )
    )
    for line in diff[:_DIFF_LINES]:
        err.print(escape(line))
    if len(diff) > _DIFF_LINES:
        err.print(f"... {len(diff) - _DIFF_LINES} more diff lines")
    state = "is missing" if not current else "is stale"
    err.print(
        f"[red]✗[/red] {escape(str(path))} {state}: regenerate it with `{escape(command)}` "
        "(it follows the Spec model and the installed first-party plugins) and commit it"
    )
    raise typer.Exit(EXIT_NOT_READY)
