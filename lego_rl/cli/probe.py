"""``legorl probe SPEC``: per-task pass rates of the current policy, for the pass-rate filter."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lego_rl.cli.common import EXIT_NOT_READY, err, escape, out, registry, reports_errors
from lego_rl.cli.plan import OverridesArg, SpecArg, show_readiness
from lego_rl.cli.readiness import check
from lego_rl.registry import BuildContext
from lego_rl.spec.resolve import load_and_resolve


@reports_errors
def probe(
    spec: SpecArg,
    overrides: OverridesArg = None,
    attempts: Annotated[
        int | None,
        typer.Option(help="Attempts per task; default: the pass-rate filter's, else 8.", min=1),
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option(help="Where to store the rates; default: the pass-rate filter's file."),
    ] = None,
) -> None:
    """Run k attempts per task with the current policy and store per-task pass rates.

    Tasks already probed with enough attempts for this policy are not run again.
    """
    from lego_rl.engine.passrates import default_path
    from lego_rl.engine.probe import probe as run_probe

    reg = registry()
    resolved = load_and_resolve(spec, reg, overrides or [])
    readiness = check(resolved, reg, spec)
    blocking = [f for f in readiness.fatal if f.path != "filter"]  # the filter needs this probe
    if readiness.missing or blocking:
        show_readiness(readiness)
        err.print(f"[red]✗[/red] cannot probe with {escape(str(spec))}: fix the problems above")
        raise typer.Exit(EXIT_NOT_READY)
    options = resolved.block("filter").options if resolved.spec.filter.plugin == "pass-rate" else None
    default_attempts: int = getattr(options, "probes", 8)
    k = attempts or default_attempts
    if file is not None:
        where = file.resolve()
    elif filter_file := getattr(options, "file", None):
        where = BuildContext(spec_dir=spec.resolve().parent).path(filter_file)
    else:
        where = default_path(resolved.spec).resolve()
    rates = run_probe(
        resolved,
        reg,
        spec,
        attempts=k,
        path=where,
        on_trial=lambda r: out.print(f"  {escape(r.task)}: {r.termination.value} reward={r.reward:g}"),
    )
    for task, (tried, passed) in sorted(rates.tasks.items()):
        out.print(f"{escape(task)}: {passed}/{tried}")
    out.print(f"[green]✓[/green] pass rates of {len(rates.tasks)} tasks: {escape(str(where))}")
