"""``legorl redteam``: attack the sandbox, the verifier and the anti-cheat policies.

Runs the red-team suite of the installed ``legorl-std`` (``legorl_std.redteam``): every
attack must end with reward 0 (``cheat_blocked`` where a policy detects it) while the
honest oracle of the same task gets 1. Prints a table, then one JSON line.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from lego_rl.cli.common import err, out


def redteam(
    only: Annotated[list[str] | None, typer.Argument(help="Attack names to run (default: all).")] = None,
    workers: Annotated[int, typer.Option(help="Trials run at once.")] = 3,
) -> None:
    """Run the red-team suite; exit 1 on any false reward or a failed oracle."""
    try:
        from legorl_std.redteam.attacks import ATTACKS
        from legorl_std.redteam.suite import run_suite, summary
    except ModuleNotFoundError as exc:
        err.print(f"the red-team suite comes with legorl-std, which is not importable here: {exc}")
        raise typer.Exit(1) from None
    names = {a.name for a in ATTACKS}
    unknown = sorted(set(only or []) - names)
    if unknown:
        err.print(f"unknown attack(s) {', '.join(unknown)} (available: {', '.join(sorted(names))})")
        raise typer.Exit(2)
    outcomes = run_suite([a for a in ATTACKS if not only or a.name in only], workers=workers)
    table = Table("attack", "category", "reward", "termination", "verdict", "reason")
    for o in outcomes:
        verdict = "ok" if o.ok else "[red]FAIL[/red]"
        table.add_row(o.attack.name, o.attack.category, f"{o.reward:g}", o.termination.value, verdict, o.reason[:80])
    out.print(table)
    figures = summary(outcomes)
    typer.echo(json.dumps(figures))
    if figures["false_rewards"] or not figures["oracle_ok"] or figures["missed_detections"]:
        raise typer.Exit(1)
