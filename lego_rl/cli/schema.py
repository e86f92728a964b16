"""``legorl schema``: write or check schemas/spec.schema.json."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated

import typer

from lego_rl.catalog import CATALOG_PATH, FIRST_PARTY, checkout_distributions, generate, shown
from lego_rl.catalog import dumps as catalog_dumps
from lego_rl.cli.common import EXIT_NOT_READY, err, escape, out, registry, reports_errors
from lego_rl.spec.schema import SCHEMA_PATH, dumps, spec_schema

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
    """Generate the spec's JSON Schema (draft 2020-12) with the options of known plugins, and
    the catalogue of first-party plugins (lego_rl/catalog.json) beside it."""
    reg = registry()
    ours = checkout_distributions() or FIRST_PARTY  # outside a checkout: the shipped catalogue's
    include = (lambda _info: True) if installed else (lambda info: info.distribution in ("lego-rl", *ours))
    text = dumps(spec_schema(reg, include))
    if installed and output is None and not check:
        typer.echo(text, nl=False)
        return
    path = output or SCHEMA_PATH
    files = [(path, text, "legorl schema" + (f" --output {path}" if output else ""))]
    if not installed and output is None:
        files.append((CATALOG_PATH, catalog_dumps(generate(reg, ours)), "legorl schema"))
    if check:
        stale = [target for target, content, command in files if not _check(target, content, command)]
        if stale:
            raise typer.Exit(EXIT_NOT_READY)
        return
    for target, content, _ in files:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        out.print(f"[green]✓[/green] wrote {escape(shown(target))}")


def _check(path: Path, text: str, command: str) -> bool:
    current = path.read_text() if path.is_file() else ""
    if current == text:
        out.print(f"[green]✓[/green] {escape(shown(path))} is up to date")
        return True
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
        f"[red]✗[/red] {escape(shown(path))} {state}: regenerate it with `{escape(command)}` "
        "(it follows the Spec model and the installed first-party plugins) and commit it"
    )
    return False

