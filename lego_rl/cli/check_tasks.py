"""``legorl check-tasks SPEC``: every task's oracle earns 1 and doing nothing 0, through the
spec's sandbox, anti-cheat policies and verifier."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lego_rl.cli.common import EXIT_NOT_READY, err, escape, out, registry, reports_errors
from lego_rl.cli.plan import OverridesArg, SpecArg, show_readiness
from lego_rl.cli.readiness import check
from lego_rl.spec.resolve import load_and_resolve

if TYPE_CHECKING:
    from lego_rl.engine.task_check import TaskCheck

USED = ("tasks", "sandbox", "verifier", "anticheat")
"""The blocks a check runs (the policy's model, inference and trainer are not used)."""


@reports_errors
def check_tasks(
    spec: SpecArg,
    overrides: OverridesArg = None,
    include: Annotated[
        list[str] | None, typer.Option(help="Glob of task names to check (repeatable); default: all.")
    ] = None,
    workers: Annotated[int, typer.Option(help="Tasks checked at a time.", min=1)] = 2,
    dir: Annotated[
        Path | None, typer.Option(help="Where the trials' directories go; default: run.output_dir/<run name>-check.")
    ] = None,
) -> None:
    """Check the spec's tasks: each one's oracle must earn 1 and doing nothing 0.

    Runs two trials per task through the spec's own sandbox, anti-cheat policies and verifier,
    the `scripted` harness playing the task's solution/solve.sh (or its oracle commands) and
    then nothing. Prints one line per task and a JSON summary last; exit 1 if any task is broken.
    """
    from lego_rl.engine.resume import fresh_run_dir
    from lego_rl.engine.task_check import check_tasks as run_checks

    reg = registry()
    resolved = load_and_resolve(spec, reg, overrides or [])
    readiness = check(resolved, reg, spec)
    blocking = [f for f in readiness.fatal if f.path.split(".")[0] in USED]
    if readiness.missing or blocking:
        show_readiness(readiness)
        err.print(f"[red]✗[/red] cannot check the tasks of {escape(str(spec))}: fix the problems above")
        raise typer.Exit(EXIT_NOT_READY)
    run = resolved.spec.run
    where = dir or fresh_run_dir(run.output_dir.resolve() / f"{run.name}-check")
    patterns = include or ["*"]

    def show(result: TaskCheck) -> None:
        mark = "[green]✓[/green]" if result.ok else "[red]✗[/red]"
        out.print(f"{mark} {escape(result.task)}" + "".join(f"\n    {escape(p)}" for p in result.problems))

    results = run_checks(
        resolved, reg, spec, run_dir=where, workers=workers, on_check=show,
        select=lambda task: any(fnmatch.fnmatchcase(task.name, p) for p in patterns),
    )  # fmt: skip
    broken = [r.task for r in results if not r.ok]
    out.print(json.dumps({"tasks": len(results), "ok": len(results) - len(broken), "broken": broken, "trials": str(where)}))
    if broken or not results:
        raise typer.Exit(EXIT_NOT_READY)
