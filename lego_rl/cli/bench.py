"""``legorl bench NAME``: measurements that print JSON on their last line.

Each benchmark is a function ``main(args: list[str]) -> dict`` in its own module, imported
only when asked for (some need torch). Plugins' benchmarks live beside the plugin.
"""

from __future__ import annotations

import importlib
import json
from typing import Annotated

import typer

from lego_rl.cli.common import err

BENCHMARKS: dict[str, str] = {
    "proxy": "lego_rl.bench.proxy:main",
    "sandbox": "legorl_std.bench_sandbox:main",
    "consistency": "legorl_embedded.bench_consistency:main",
    "inference": "legorl_embedded.bench_inference:main",
    "schedule": "lego_rl.bench.schedule:main",
    "learn": "lego_rl.bench.learn:main",
}
"""Benchmark name -> "module:function"."""


def bench(
    name: Annotated[str, typer.Argument(help=f"One of: {', '.join(BENCHMARKS)}.")],
    args: Annotated[list[str] | None, typer.Argument(help="Options passed to the benchmark.")] = None,
) -> None:
    """Run a benchmark; its figures are printed as one JSON object on the last line."""
    target = BENCHMARKS.get(name)
    if target is None:
        err.print(f"unknown benchmark {name!r} (available: {', '.join(BENCHMARKS)})")
        raise typer.Exit(2)
    module_name, _, func = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        err.print(f"benchmark {name!r} is not available here: {exc}")
        raise typer.Exit(1) from None
    figures = getattr(module, func)(list(args or []))
    typer.echo(json.dumps(figures, sort_keys=True))
