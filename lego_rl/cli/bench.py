"""``legorl bench NAME``: measurements that print JSON on their last line.

Each benchmark is a function ``main(args: list[str]) -> dict``. The core's own are imported
only when asked for; plugins register theirs through ``legorl_register_benchmarks`` (e.g.
``sandbox`` from legorl-std, ``consistency`` and ``inference`` from legorl-embedded).
"""

from __future__ import annotations

import importlib
import json
from typing import Annotated

import typer

from lego_rl.cli.common import err
from lego_rl.registry import Benchmark, RegistryError, default_registry

CORE_BENCHMARKS: dict[str, str] = {
    "proxy": "lego_rl.bench.proxy:main",
    "schedule": "lego_rl.bench.schedule:main",
    "learn": "lego_rl.bench.learn:main",
}
"""The core's benchmarks: name -> "module:function"."""


def bench(
    name: Annotated[str, typer.Argument(help="A benchmark: proxy, schedule, learn, or one a plugin registers.")],
    args: Annotated[list[str] | None, typer.Argument(help="Options passed to the benchmark.")] = None,
) -> None:
    """Run a benchmark; its figures are printed as one JSON object on the last line."""
    figures = _find(name)(list(args or []))
    typer.echo(json.dumps(figures, sort_keys=True))


def _find(name: str) -> Benchmark:
    if name in CORE_BENCHMARKS:
        module_name, _, func = CORE_BENCHMARKS[name].partition(":")
        try:
            return getattr(importlib.import_module(module_name), func)
        except ModuleNotFoundError as exc:
            err.print(f"benchmark {name!r} is not available here: {exc}")
            raise typer.Exit(1) from None
    try:
        plugins = default_registry().benchmarks()
    except RegistryError as exc:
        err.print(f"cannot load the plugins' benchmarks: {exc}")
        raise typer.Exit(1) from None
    if name not in plugins:
        available = sorted({*CORE_BENCHMARKS, *plugins})
        err.print(f"unknown benchmark {name!r} (available: {', '.join(available)})")
        raise typer.Exit(2)
    return plugins[name]
