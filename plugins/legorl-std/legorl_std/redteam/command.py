"""``legorl redteam``: attack the sandbox, the verifier and the anti-cheat policies.

A command legorl-std adds to the command line (``legorl_register_commands``). Runs the
red-team suite (:mod:`legorl_std.redteam`) on every task
kind and sandbox backend asked for: every attack must end with reward 0 (``cheat_blocked``
where a policy detects it) and never as an infrastructure failure, while the honest oracle of
each task gets 1. Prints a table, then one JSON line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from lego_rl import hookimpl
from lego_rl.cli.common import err, out


def redteam(
    only: Annotated[list[str] | None, typer.Argument(help="Attack names to run (default: all).")] = None,
    workers: Annotated[int, typer.Option(help="Trials run at once.")] = 3,
    kind: Annotated[
        list[str] | None, typer.Option(help="Task kinds to attack: calc, bugfix (default: both).")
    ] = None,
    task: Annotated[
        list[Path] | None, typer.Option(help="A shipped Harbor task dir to attack too (repeatable).")
    ] = None,
    bug: Annotated[
        list[Path] | None,
        typer.Option(help="A pypi-bugs bug dir (e.g. tasks/pypi-bugs/cachetools-7.1.5): a real-repository task "
                     "with upstream's fix in its history, to attack too (repeatable)."),
    ] = None,
    backend: Annotated[
        list[str] | None,
        typer.Option(help="Sandbox backends: local, harbor, docker (default: every one available here; docker: "
                     "the daemon of $LEGORL_DOCKER_HOST)."),
    ] = None,
) -> None:
    """Run the red-team suite; exit 1 on any false reward, a failed oracle or a laundered failure."""
    from legorl_std.redteam.catalog import ALL_ATTACKS  # the suite imports the engine: on use only
    from legorl_std.redteam.suite import available_backends, run_suite, summary

    names = {a.name for a in ALL_ATTACKS}
    unknown = sorted(set(only or []) - names)
    if unknown:
        err.print(f"unknown attack(s) {', '.join(unknown)} (available: {', '.join(sorted(names))})")
        raise typer.Exit(2)
    missing = [str(t) for t in task or [] if not (t / "task.toml").is_file()]
    if missing:
        err.print(f"not a Harbor task dir (no task.toml): {', '.join(missing)}")
        raise typer.Exit(2)
    missing = [str(b) for b in bug or [] if not (b / "bug.toml").is_file()]
    if missing:
        err.print(f"not a pypi-bugs bug dir (no bug.toml): {', '.join(missing)}")
        raise typer.Exit(2)
    outcomes = run_suite(
        [a for a in ALL_ATTACKS if not only or a.name in only],
        workers=workers,
        kinds=kind or ["calc", "bugfix"],
        shipped=task or [],
        bugs=bug or [],
        backends=backend or available_backends(),
    )
    table = Table("attack", "category", "task", "sandbox", "reward", "termination", "verdict", "reason")
    for o in outcomes:
        verdict = "ok" if o.ok else "[red]FAIL[/red]"
        table.add_row(
            o.attack.name, o.attack.category, o.kind, o.backend, f"{o.reward:g}", o.termination.value, verdict,
            o.reason[:60],
        )  # fmt: skip
    out.print(table)
    figures = summary(outcomes)
    typer.echo(json.dumps(figures))
    failed = not figures["oracle_ok"] or not figures["noop_ok"] or figures["missed_detections"]
    if failed or figures["false_rewards"] or figures["infrastructure"]:
        raise typer.Exit(1)


@hookimpl
def legorl_register_commands(cli: typer.Typer) -> None:
    cli.command()(redteam)
