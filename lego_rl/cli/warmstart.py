"""``legorl warmstart SPEC [KEY=VALUE...]``: record oracle demonstrations through the spec's
harness and fit the policy to them (cached; ``legorl apply`` runs it when needed)."""

from __future__ import annotations

import typer

from lego_rl.cli.common import EXIT_NOT_READY, err, escape, out, registry, reports_errors
from lego_rl.cli.plan import OverridesArg, SpecArg, show_readiness
from lego_rl.cli.readiness import check
from lego_rl.spec.resolve import load_and_resolve


@reports_errors
def warmstart(spec: SpecArg, overrides: OverridesArg = None) -> None:
    """Warm-start the spec's policy (model.warmstart): print the checkpoint directory."""
    from lego_rl.engine.warmstart import WarmstartError
    from lego_rl.engine.warmstart import warmstart as run_warmstart

    reg = registry()
    resolved = load_and_resolve(spec, reg, overrides or [])
    if resolved.spec.model.warmstart is None:
        err.print(f"[red]✗[/red] {escape(str(spec))}: add a model.warmstart block (e.g. `warmstart: {{demos: 64}}`)")
        raise typer.Exit(2)
    readiness = check(resolved, reg, spec)
    if not readiness.ready:
        show_readiness(readiness)
        err.print(f"[red]✗[/red] refusing to warm-start {escape(str(spec))}: fix the problems above")
        raise typer.Exit(EXIT_NOT_READY)
    try:
        path = run_warmstart(resolved, reg, spec, log=lambda line: out.print(escape(line)))
    except WarmstartError as exc:
        err.print(f"[red]✗[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None
    out.print(f"[green]✓[/green] warm-started policy: {escape(str(path))}")
