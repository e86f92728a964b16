"""``legorl validate SPEC... [KEY=VALUE...]``: check specs against the installed plugins."""

from __future__ import annotations

from typing import Annotated

import typer

from lego_rl.cli.common import (
    EXIT_SPEC,
    escape,
    out,
    print_spec_error,
    registry,
    reports_errors,
    split_args,
)
from lego_rl.spec.load import SpecError
from lego_rl.spec.resolve import load_and_resolve


@reports_errors
def validate(
    args: Annotated[
        list[str],
        typer.Argument(
            help="Spec files, then KEY=VALUE overrides applied to each (e.g. run.steps=3).",
            metavar="SPEC... [KEY=VALUE...]",
        ),
    ],
) -> None:
    """Validate specs: structure, plugin names and every plugin's options.

    Exit 0 when all are valid (first-party plugins that are not installed are warnings),
    2 when any has errors; every error is listed with its spec path.
    """
    specs, overrides = split_args(args)
    if not specs:
        raise typer.BadParameter("give at least one spec file", param_hint="SPEC")
    reg = registry()
    failed = 0
    for path in specs:
        try:
            resolved = load_and_resolve(path, reg, overrides)
        except SpecError as exc:
            failed += 1
            print_spec_error(exc, out)
            continue
        out.print(f"[green]✓[/green] {escape(str(path))}: OK")
        for block in resolved.missing:
            out.print(f"  [yellow]warning[/yellow] {block.path}.plugin: {escape(block.missing)}")
    if failed:
        raise typer.Exit(EXIT_SPEC)
