"""``legorl new-plugin KIND NAME``: a ready plugin distribution from the template."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lego_rl.cli.common import err, escape, out
from lego_rl.kinds import KINDS


def new_plugin(
    kind: Annotated[str, typer.Argument(help=f"The plugin kind: {', '.join(KINDS)}.")],
    name: Annotated[str, typer.Argument(help="The name specs will use, e.g. my-agent.")],
    directory: Annotated[
        Path, typer.Option("--dir", help="Where to create the distribution legorl-NAME.")
    ] = Path("."),
) -> None:
    """Generate a plugin package: entry point, options model, conformance tests, README."""
    from lego_rl.scaffold import ScaffoldError, plugin_names
    from lego_rl.scaffold import new_plugin as generate

    try:
        target = generate(kind, name, directory)
    except ScaffoldError as exc:
        err.print(f"[red]✗[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    names = plugin_names(kind, name)
    out.print(f"[green]✓[/green] created {escape(str(target))}: the {kind} plugin {name!r}")
    out.print(f"  {names.package}/plugin.py   the {kind} (fill in its TODOs)")
    out.print("  tests/                 one test per lego-rl contract of the kind, the example spec's schema check")
    out.print(escape(f"next: cd {target} && pip install -e '.[test]' && pytest"))
