"""What every command shares: consoles, argument splitting, and error reporting."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from lego_rl import registry as registry_module
from lego_rl.console import make_console
from lego_rl.registry import Registry, RegistryError
from lego_rl.spec.load import SpecError

out = make_console()
"""The command's report (stdout); never wrapped in a file or pipe (:mod:`lego_rl.console`)."""
err = make_console(stderr=True)
"""Why the command failed (stderr)."""

EXIT_NOT_READY = 1
"""Apply would refuse (missing plugins, fatal preflight), or the environment is broken."""
EXIT_SPEC = 2
"""The spec itself is wrong."""


def registry() -> Registry:
    """The registry of installed plugins (tests swap ``lego_rl.registry._default``)."""
    return registry_module.default_registry()


def split_args(args: list[str]) -> tuple[list[Path], list[str]]:
    """Spec paths and KEY=VALUE overrides, from one list of positional arguments.

    An argument is a spec when it is an existing file, ends in .yaml/.yml or has no '='.
    """
    specs: list[Path] = []
    overrides: list[str] = []
    for arg in args:
        path = Path(arg)
        if "=" not in arg or path.suffix in {".yaml", ".yml"} or path.is_file():
            specs.append(path)
        else:
            overrides.append(arg)
    return specs, overrides


def print_spec_error(exc: SpecError, console: Console = err) -> None:
    n = len(exc.errors)
    console.print(f"[red]✗[/red] {escape(exc.source)}: {n} error{'s' if n != 1 else ''}")
    for path, message in exc.errors:
        console.print(f"  {escape(path or '(root)')}: {escape(message)}")


def reports_errors[**P, R](command: Callable[P, R]) -> Callable[P, R]:
    """Expected failures become a message and an exit code, never a traceback."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except SpecError as exc:
            print_spec_error(exc)
            raise typer.Exit(EXIT_SPEC) from None
        except RegistryError as exc:
            err.print(f"[red]✗[/red] {escape(str(exc))}")
            raise typer.Exit(EXIT_NOT_READY) from None

    return wrapper
