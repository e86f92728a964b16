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
from lego_rl.spec.load import SpecError, raw_spec
from lego_rl.spec.resolve import load_and_resolve
from lego_rl.spec.schema import schema_errors, spec_schema


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

    Each spec is checked by the plugins' own options models, then against the JSON Schema of
    every installed plugin (`legorl schema --installed`), so a CI that validates with that
    schema alone agrees. Exit 0 when all are valid (first-party plugins that are not installed
    are warnings), 2 when any has errors; every error is listed with its spec path.
    """
    specs, overrides = split_args(args)
    if not specs:
        raise typer.BadParameter("give at least one spec file", param_hint="SPEC")
    reg = registry()
    schema = spec_schema(reg, lambda _info: True)
    failed = 0
    for path in specs:
        try:
            resolved = load_and_resolve(path, reg, overrides)
            if disagreements := schema_errors(raw_spec(path, overrides), schema):
                raise SpecError(str(path), disagreements)
        except SpecError as exc:
            failed += 1
            print_spec_error(exc, out)
            continue
        out.print(f"[green]✓[/green] {escape(str(path))}: OK")
        for block in resolved.missing:
            out.print(f"  [yellow]warning[/yellow] {block.path}.plugin: {escape(block.missing)}")
    if failed:
        raise typer.Exit(EXIT_SPEC)
