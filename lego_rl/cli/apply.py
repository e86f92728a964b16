"""``legorl apply SPEC [KEY=VALUE...]``: run a spec, after checking that it can run."""

from __future__ import annotations

import typer

from lego_rl.cli.common import EXIT_NOT_READY, err, escape, out, registry, reports_errors
from lego_rl.cli.plan import OverridesArg, SpecArg, show_readiness
from lego_rl.cli.readiness import check
from lego_rl.spec.resolve import load_and_resolve


@reports_errors
def apply(spec: SpecArg, overrides: OverridesArg = None) -> None:
    """Run the spec to the end.

    Refuses (exit 1) before starting anything when a plugin is missing or a component's
    preflight reports a fatal problem; exit 2 when the spec has errors.
    """
    reg = registry()
    resolved = load_and_resolve(spec, reg, overrides or [])
    readiness = check(resolved, reg, spec)
    if not readiness.ready:
        show_readiness(readiness)
        err.print(f"[red]✗[/red] refusing to start {escape(str(spec))}: fix the problems above")
        raise typer.Exit(EXIT_NOT_READY)
    for finding in readiness.warnings:
        out.print(f"[yellow]![/yellow] {finding.path}: {escape(finding.message)}")
    try:
        from lego_rl.engine.run import apply as run_spec
    except ImportError as exc:
        err.print(f"[red]✗[/red] the run engine is not available: {escape(str(exc))}")
        raise typer.Exit(EXIT_NOT_READY) from None
    from lego_rl.engine.warmstart import WarmstartError, with_warmstart

    try:
        resolved = with_warmstart(resolved, reg, spec, log=lambda line: out.print(escape(line)))
    except WarmstartError as exc:
        err.print(f"[red]✗[/red] {escape(str(exc))}")
        raise typer.Exit(EXIT_NOT_READY) from None
    run_dir = run_spec(resolved=resolved, registry=reg, spec_path=spec, console=out)
    out.print(f"[green]✓[/green] run finished: {escape(str(run_dir))}")
