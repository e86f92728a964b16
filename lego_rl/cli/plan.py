"""``legorl plan SPEC [KEY=VALUE...]``: what ``apply`` would run, and whether it can."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.table import Table

from lego_rl.cli.common import (
    EXIT_NOT_READY,
    EXIT_SPEC,
    escape,
    out,
    registry,
    reports_errors,
)
from lego_rl.cli.readiness import Readiness, check
from lego_rl.kinds import PlanDetails
from lego_rl.registry import BuildContext, Registry
from lego_rl.spec.load import SpecError
from lego_rl.spec.resolve import Resolved, load_and_resolve

SpecArg = Annotated[Path, typer.Argument(help="The spec file.", metavar="SPEC")]
OverridesArg = Annotated[
    list[str] | None,
    typer.Argument(help="KEY=VALUE overrides, e.g. run.steps=3.", metavar="[KEY=VALUE...]"),
]


@reports_errors
def plan(
    spec: SpecArg,
    overrides: OverridesArg = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show the resolved plugins, every option with its default, and preflight checks.

    Exit 0 when ready, 1 when apply would refuse (missing plugins, fatal preflight
    problems), 2 when the spec has errors.
    """
    reg = registry()
    try:
        resolved = load_and_resolve(spec, reg, overrides or [])
    except SpecError as exc:
        if not as_json:
            raise
        typer.echo(json.dumps({"spec": str(spec), "errors": _errors(exc)}, indent=2))
        raise typer.Exit(EXIT_SPEC) from None
    readiness = check(resolved, reg, spec)
    details = plugin_details(resolved, reg, spec)
    if as_json:
        typer.echo(json.dumps({**plan_data(spec, readiness), "details": details}, indent=2))
    else:
        show_plan(spec, readiness)
        show_details(details)
    if not readiness.ready:
        raise typer.Exit(EXIT_NOT_READY)


def plan_data(spec_path: Path, readiness: Readiness) -> dict[str, Any]:
    """The plan as JSON-ready data."""
    resolved = readiness.resolved
    return {
        "spec": str(spec_path),
        "ready": readiness.ready,
        "plugins": [
            {
                "path": b.path,
                "kind": b.kind,
                "name": b.block.plugin,
                "distribution": b.info.distribution if b.info else None,
                "version": b.info.version if b.info else None,
                "installed": b.info is not None,
            }
            for b in resolved.blocks
        ],
        "options": options_data(resolved),
        "model": resolved.spec.model.model_dump(mode="json"),
        "run": resolved.spec.run.model_dump(mode="json"),
        "missing": [
            {"path": b.path, "kind": b.kind, "name": b.block.plugin, "how": b.missing}
            for b in readiness.missing
        ],
        "preflight": [f.as_dict() for f in readiness.findings],
        "needs_gpu": readiness.needs_gpu,
    }


def plugin_details(resolved: Resolved, reg: Registry, spec_path: Path) -> dict[str, Any]:
    """Block path -> what its plugin adds to the plan, through the optional hook of any kind:
    a factory that is :class:`~lego_rl.kinds.PlanDetails` (the verl trainer shows its verl
    config). A hook that raises gives ``{"error": ...}``."""
    spec = resolved.spec
    ctx = BuildContext(
        spec=spec, run_dir=spec.run.run_dir.resolve(), spec_dir=spec_path.resolve().parent
    )
    details: dict[str, Any] = {}
    for b in resolved.blocks:
        factory = b.info.factory if b.info else None
        if not isinstance(factory, PlanDetails) or b.options is None:
            continue
        try:
            details[b.path] = factory.plan_details(b.options, ctx)
        except Exception as exc:  # noqa: BLE001 - a plugin's hook must not end the plan
            details[b.path] = {"error": f"{type(exc).__name__}: {exc}"}
    return details


def show_details(details: dict[str, Any]) -> None:
    for path, data in details.items():
        for title, value in data.items():
            out.print(f"\n[bold]{escape(path)}: {escape(title)}[/bold]")
            text = yaml.safe_dump(value, sort_keys=False, default_flow_style=False).rstrip()
            out.print(escape(_indent(text)))


def options_data(resolved: Resolved) -> dict[str, Any]:
    """Block path -> its options with defaults (as given, unchecked, for a missing plugin)."""
    return {
        b.path: b.options.model_dump(mode="json") if b.options is not None else b.block.options
        for b in resolved.blocks
    }


def show_plan(spec_path: Path, readiness: Readiness) -> None:
    resolved = readiness.resolved
    table = Table(title=f"Plan of {escape(str(spec_path))}", title_justify="left")
    for column in ("block", "kind", "plugin", "distribution", "version"):
        table.add_column(column)
    for b in resolved.blocks:
        if b.info is None:
            table.add_row(b.path, b.kind, b.block.plugin, "[red]missing[/red]", "")
        else:
            table.add_row(b.path, b.kind, b.block.plugin, b.info.distribution, b.info.version)
    out.print(table)

    out.print("\n[bold]Options[/bold] (with defaults)")
    options = options_data(resolved)
    sections = {
        "model": resolved.spec.model.model_dump(mode="json"),
        "run": resolved.spec.run.model_dump(mode="json"),
    }
    for b in resolved.blocks:
        note = " (not checked: plugin missing)" if b.info is None else ""
        sections[f"{b.path}: {b.block.plugin}{note}"] = options[b.path]
    for title, data in sections.items():
        out.print(f"[cyan]{escape(title)}[/cyan]")
        if data:
            text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip()
            out.print(escape(_indent(text)))

    show_readiness(readiness)


def show_readiness(readiness: Readiness) -> None:
    """Missing plugins, preflight problems, and the verdict (used by apply too)."""
    if readiness.missing:
        out.print("\n[bold]Missing plugins[/bold]")
        for b in readiness.missing:
            out.print(f"  [red]✗[/red] {b.path}: {escape(b.missing)}")
    out.print("\n[bold]Preflight[/bold]")
    if not readiness.findings:
        out.print("  [green]✓[/green] no problems reported by the installed components")
    for f in readiness.findings:
        mark = "[red]✗[/red]" if f.fatal else "[yellow]![/yellow]"
        gpu = " [magenta](needs a GPU)[/magenta]" if f.needs_gpu else ""
        fix = f" — {escape(f.fix)}" if f.fix else ""
        out.print(f"  {mark} {f.path} ({escape(f.plugin)}): {escape(f.message)}{fix}{gpu}")
    if readiness.needs_gpu:
        out.print(f"needs a GPU: {', '.join(readiness.needs_gpu)}")
    if readiness.ready:
        out.print("\n[green]ready[/green]")
    else:
        parts = []
        if readiness.missing:
            parts.append(f"{len(readiness.missing)} missing plugin(s)")
        if readiness.fatal:
            parts.append(f"{len(readiness.fatal)} fatal preflight problem(s)")
        out.print(f"\n[red]not ready[/red]: {', '.join(parts)}; apply would refuse to start")


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def _errors(exc: SpecError) -> list[dict[str, str]]:
    return [{"path": p, "message": m} for p, m in exc.errors]
