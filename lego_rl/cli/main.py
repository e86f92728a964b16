"""The ``legorl`` command line: one module per command, assembled here."""

from __future__ import annotations

from typing import Annotated

import typer

from lego_rl import __version__
from lego_rl.cli.apply import apply
from lego_rl.cli.bench import bench
from lego_rl.cli.check_tasks import check_tasks
from lego_rl.cli.common import err
from lego_rl.cli.dashboard import dashboard
from lego_rl.cli.export import export
from lego_rl.cli.new_plugin import new_plugin
from lego_rl.cli.plan import plan
from lego_rl.cli.plugins import plugins
from lego_rl.cli.probe import probe
from lego_rl.cli.report import report
from lego_rl.cli.schema import schema
from lego_rl.cli.validate import validate
from lego_rl.cli.warmstart import warmstart
from lego_rl.registry import RegistryError, default_registry

app = typer.Typer(
    name="legorl",
    help="Reinforcement learning of coding agents on their native, unmodified harnesses.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)
for command in (
    validate, plan, apply, warmstart, schema, plugins, dashboard, export, report, probe,
):  # fmt: skip
    app.command()(command)
app.command(context_settings={"ignore_unknown_options": True})(bench)  # its options: the bench's
app.command("new-plugin")(new_plugin)
app.command("check-tasks")(check_tasks)
try:  # plugins' own commands (legorl-std's `redteam`); a broken plugin leaves the core's usable
    default_registry().add_commands(app)
except RegistryError as exc:
    err.print(f"[yellow]plugin commands not loaded:[/yellow] {exc}")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"legorl {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """lego-rl: one YAML spec, any harness, token-exact RL."""


if __name__ == "__main__":
    app()
