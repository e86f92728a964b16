"""The shapes a bug-fix template is written in: functions with test cases, and bug sites."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

BugKind = Literal[
    "wrong-operator", "off-by-one", "wrong-constant", "swapped-args", "wrong-comparison", "wrong-return"
]
BUG_KINDS: tuple[BugKind, ...] = (
    "wrong-operator",
    "off-by-one",
    "wrong-constant",
    "swapped-args",
    "wrong-comparison",
    "wrong-return",
)
Level = Literal[1, 2, 3, 4]
LEVELS: tuple[Level, ...] = (1, 2, 3, 4)
DEFAULT_LEVELS: tuple[Level, ...] = (1, 2, 3)
"""Level 4 (candidate fixes told apart by the tests) is asked for by name."""
SPLITS = ("train", "heldout")


@dataclass(frozen=True)
class Function:
    """One function of a template module.

    ``code`` and ``purpose`` are ``str.format`` templates over the template's name
    placeholders (``{f}``, ``{width}``...); ``call`` names the placeholder of the function's
    own name; ``cases`` are argument tuples the hidden tests call it with; ``needs`` lists the
    calls of other functions of the module (they are kept in a one-function module).
    """

    call: str
    code: str
    purpose: str
    cases: tuple[tuple[Any, ...], ...]
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Bug:
    """One bug site: ``fixed`` (in the correct code) becomes ``buggy``, in function ``call``."""

    kind: BugKind
    call: str
    fixed: str
    buggy: str


@dataclass(frozen=True)
class Template:
    """A small module: its docstring, functions, bug sites, and name pools per split.

    ``names[placeholder] = (train choices, heldout choices)``; the two are disjoint so that
    held-out modules never reuse a train identifier.
    """

    doc: str
    functions: tuple[Function, ...]
    bugs: tuple[Bug, ...]
    names: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)

    def function(self, call: str) -> Function:
        return next(f for f in self.functions if f.call == call)
