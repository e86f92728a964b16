"""Plugin hooks: one registration hook per plugin kind (the ``llm`` style).

Each hook receives a ``register(name, factory, options=OptionsModel)`` callback.
``factory(options, ctx)`` builds the component from its validated options and the
:class:`lego_rl.registry.BuildContext`. A plugin module looks like::

    from lego_rl import hookimpl

    @hookimpl
    def legorl_register_harness(register):
        register("my-agent", MyAgent, options=MyAgentOptions)
"""

from __future__ import annotations

from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("lego_rl")
hookimpl = pluggy.HookimplMarker("lego_rl")

Register = Any
"""Callable[[str, Callable[[BaseModel, BuildContext], T], type[BaseModel]], None]."""


# Data in: where tasks come from and where they run.
@hookspec
def legorl_register_tasks(register: Register) -> None:
    """Register task sources (yield Harbor-format task directories)."""


@hookspec
def legorl_register_sandbox(register: Register) -> None:
    """Register sandbox backends (start/exec/upload/download/stop a trial environment)."""


# The agent and the API it speaks.
@hookspec
def legorl_register_harness(register: Register) -> None:
    """Register harnesses (install and launch an unmodified agent CLI in a sandbox)."""


@hookspec
def legorl_register_dialect(register: Register) -> None:
    """Register model API dialects served by the proxy."""


# Judging the attempt.
@hookspec
def legorl_register_verifier(register: Register) -> None:
    """Register verifiers (run the task's tests, return a binary reward)."""


@hookspec
def legorl_register_anticheat(register: Register) -> None:
    """Register anti-cheat policies (hooks before agent, before verify, after)."""


# Learning.
@hookspec
def legorl_register_filter(register: Register) -> None:
    """Register difficulty filters (which tasks and groups feed the trainer)."""


@hookspec
def legorl_register_optimizer(register: Register) -> None:
    """Register objectives over groups of trajectories."""


@hookspec
def legorl_register_inference(register: Register) -> None:
    """Register inference backends (token ids in; ids, log-probs, routed experts out)."""


@hookspec
def legorl_register_trainer(register: Register) -> None:
    """Register trainers (own the outer loop, update weights, sync them to inference)."""


# Watching.
@hookspec
def legorl_register_observer(register: Register) -> None:
    """Register observers of run events (run store, dashboards, metric sinks)."""


# Tools: what a plugin adds to the command line (no kind: nothing a spec names).
@hookspec
def legorl_register_benchmarks(register: Register) -> None:
    """Register benchmarks of ``legorl bench NAME``: ``register(name, main)``, where
    ``main(args: list[str]) -> dict`` takes the command's remaining arguments, prints what it
    measures and returns its figures (printed as one JSON object on the last line)."""


@hookspec
def legorl_register_commands(cli: Any) -> None:
    """Add commands to the ``legorl`` command line (a typer app: ``cli.command()(function)``)."""


@hookspec
def legorl_register_tokenizers(register: Register) -> None:
    """Register tokenizers that tools load by name (``legorl bench proxy --tokenizer NAME``):
    ``register(name, load)``, where ``load()`` returns a Hugging Face-style tokenizer with a
    chat template."""


@hookspec
def legorl_register_attacks(register: Register) -> None:
    """Register red-team attacks the sandbox contracts run: ``register(attack)``, where the
    attack has ``name``, ``category``, ``what`` and ``commands`` (shell lines with the
    placeholders of :mod:`lego_rl.testing.contracts.sandbox_redteam`)."""
