"""The contract machinery: named contracts per kind, the environment they run in, and how a
plugin is built and checked against them."""

from __future__ import annotations

import shutil
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from lego_rl import kinds
from lego_rl.data import Termination, TrialResult
from lego_rl.kinds import KINDS, Problem, Task
from lego_rl.registry import BuildContext, PluginInfo, Registry
from lego_rl.spec.models import ModelSpec, RunSpec, Spec

PROTOCOLS: dict[str, type] = {
    "tasks": kinds.TaskSource,
    "sandbox": kinds.SandboxBackend,
    "harness": kinds.Harness,
    "dialect": kinds.Dialect,
    "verifier": kinds.Verifier,
    "anticheat": kinds.AntiCheat,
    "filter": kinds.Filter,
    "optimizer": kinds.Optimizer,
    "inference": kinds.Inference,
    "trainer": kinds.Trainer,
    "observer": kinds.Observer,
}
"""The Protocol in :mod:`lego_rl.kinds` that a built plugin of each kind satisfies."""


class ContractError(AssertionError):
    """A plugin broke one of its kind's contracts."""


def conformance_tasks_dir() -> Path:
    """A directory of tiny Harbor-format tasks shipped with the kit."""
    return Path(str(resources.files("lego_rl.testing") / "tasks"))


_REQUIRED_BLOCKS = ("tasks", "sandbox", "harness", "dialect", "verifier", "optimizer", "inference", "trainer")


@dataclass
class ContractEnv:
    """What contracts may use: a scratch directory, the registry, a tiny model spec."""

    tmp: Path
    registry: Registry
    model: ModelSpec = field(
        default_factory=lambda: ModelSpec(
            name="tiny",
            config={"hidden_size": 32, "num_hidden_layers": 1, "num_experts": 4},
        )
    )

    @property
    def tasks_dir(self) -> Path:
        return conformance_tasks_dir()

    def task(self, name: str = "fix-add") -> Task:
        path = self.tasks_dir / name
        return Task(
            name=name,
            path=path,
            instruction=(path / "instruction.md").read_text(),
            config=tomllib.loads((path / "task.toml").read_text()),
        )

    def build_context(self) -> BuildContext:
        spec = Spec.model_validate(
            {
                "model": self.model.model_dump(),
                "run": RunSpec(output_dir=self.tmp, name="conformance").model_dump(),
                **{k: {"plugin": "-"} for k in _REQUIRED_BLOCKS},
            }
        )
        return BuildContext(spec=spec, run_dir=self.tmp / "conformance", spec_dir=self.tmp)

    def sandbox_backend(self) -> Any:
        """The first installed sandbox plugin that passes its own preflight."""
        for name in self.registry.names("sandbox"):
            backend = build(self.registry.get("sandbox", name), self)
            if not [p for p in backend.preflight() if p.fatal]:
                return backend
        raise ContractError("no usable sandbox plugin installed to run this contract")


Check = Callable[[Any, ContractEnv], None]


@dataclass(frozen=True)
class Contract:
    """One named promise of a kind: ``check(component, env)`` raises ContractError on a breach."""

    kind: str
    name: str
    doc: str
    check: Check

    @property
    def id(self) -> str:
        return f"{self.kind}.{self.name}"


_CONTRACTS: dict[str, list[Contract]] = {kind: [] for kind in KINDS}


def contract(kind: str, name: str) -> Callable[[Check], Check]:
    """Register ``check`` as the contract ``kind.name`` (its docstring's first line is its doc)."""

    def register(check: Check) -> Check:
        doc = (check.__doc__ or "").strip().splitlines()
        _CONTRACTS[kind].append(Contract(kind, name, doc[0] if doc else name, check))
        return check

    return register


def contracts_for(kind: str) -> list[Contract]:
    """Every contract of a kind, in the order they run: the structural ones first."""
    if kind not in _CONTRACTS:
        raise KeyError(f"unknown plugin kind {kind!r}; kinds: {', '.join(KINDS)}")
    return sorted(_CONTRACTS[kind], key=lambda c: c.name != "structure")


def contract_named(contract_id: str) -> Contract:
    kind, _, name = contract_id.partition(".")
    for found in contracts_for(kind):
        if found.name == name:
            return found
    names = ", ".join(c.id for c in contracts_for(kind))
    raise KeyError(f"no contract {contract_id!r}; the {kind} contracts are: {names}")


# ------------------------------------------------------------------ building a plugin


def example_options(plugin: PluginInfo, env: ContractEnv) -> BaseModel:
    """Options to build a plugin with: its defaults, a kind convention, or its own example.

    An options model with required fields gives an example through
    ``model_config = ConfigDict(json_schema_extra={"examples": [{...}]})``.
    """
    candidates: list[dict[str, Any]] = [{}]
    if plugin.kind == "tasks":
        candidates.append({"path": str(env.tasks_dir)})
    extra = plugin.options.model_config.get("json_schema_extra")
    examples = extra.get("examples", []) if isinstance(extra, dict) else []
    if isinstance(examples, list):
        candidates.extend(e for e in examples if isinstance(e, dict))
    errors = []
    for raw in candidates:
        try:
            return plugin.options.model_validate(raw)
        except ValidationError as exc:
            errors.append(str(exc))
    raise ContractError(
        f"{plugin.kind} plugin {plugin.name!r}: options need values the kit cannot guess; "
        "give an example via json_schema_extra={'examples': [...]}\n" + "\n".join(errors)
    )


def build(plugin: PluginInfo, env: ContractEnv) -> Any:
    return plugin.factory(example_options(plugin, env), env.build_context())


def options_are_strict(plugin: PluginInfo) -> None:
    """A spec typo in the plugin's options block must be an error, not silently ignored."""
    expect(
        plugin.options.model_config.get("extra") == "forbid",
        f"the options model {plugin.options.__name__} must set model_config = ConfigDict(extra='forbid')",
    )


def satisfies_protocol(component: Any, kind: str) -> None:
    """The built component has every attribute and method of its kind's Protocol."""
    protocol = PROTOCOLS[kind]
    if isinstance(component, protocol):
        return
    members = sorted(
        name
        for name in (*getattr(protocol, "__protocol_attrs__", ()),)
        if not hasattr(component, name)
    )
    expect(False, f"{type(component).__name__} lacks {', '.join(members)} of lego_rl.kinds.{protocol.__name__}")


# ------------------------------------------------------------------ running contracts


def run_contract(plugin: PluginInfo, which: Contract, env: ContractEnv) -> None:
    """Build ``plugin`` and run one contract; a breach raises ContractError naming it."""
    env.tmp.mkdir(parents=True, exist_ok=True)
    try:
        if which.name == "structure":
            options_are_strict(plugin)
        try:
            component = build(plugin, env)
        except ContractError:
            raise
        except Exception as exc:
            raise ContractError(f"building it with example options raised {exc!r}") from exc
        try:
            which.check(component, env)
        except ContractError:
            raise
        except Exception as exc:
            raise ContractError(f"raised {exc!r}") from exc
    except ContractError as exc:
        raise ContractError(
            f"{plugin.kind} plugin {plugin.name!r} breaks contract {which.id!r} ({which.doc}): {exc}"
        ) from exc
    finally:
        shutil.rmtree(env.tmp / "conformance", ignore_errors=True)


def check(plugin: PluginInfo, env: ContractEnv) -> None:
    """Run every contract of the plugin's kind, in order; the first breach raises."""
    for which in contracts_for(plugin.kind):
        run_contract(plugin, which, env)


# ------------------------------------------------------------------ helpers for contracts


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise ContractError(message)


def problems(component: Any) -> list[Problem]:
    """The component's preflight problems, checked for shape."""
    found = component.preflight() if isinstance(component, kinds.Preflights) else []
    expect(isinstance(found, list), "preflight() must return a list of Problem")
    expect(all(isinstance(p, Problem) for p in found), "preflight() items must be lego_rl.kinds.Problem")
    return found


def no_fatal_problems(component: Any) -> None:
    fatal = [str(p) for p in problems(component) if p.fatal]
    expect(not fatal, "preflight reports fatal problems: " + "; ".join(fatal))


def result(reward: float, trial_id: str = "") -> TrialResult:
    """A completed trial with ``reward``, for contracts on filters, optimizers, observers."""
    return TrialResult(
        trial_id=trial_id or f"t{reward}", task="t", reward=reward, termination=Termination.COMPLETED
    )
