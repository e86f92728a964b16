"""Level 4 of the bug-fix tasks: candidate fixes that only running the tests tells apart.

The instruction names the buggy line and two one-token rewrites of it, the fix and a decoy
(another operator, comparison or integer where the bug is), in random order, and the command
that runs the visible tests (``python3 /app/tests/run_tests.py``: the bugged function's cases;
the hidden tests that give the reward check every function). Each rewrite matches the line's
first comparison, spaced arithmetic operator or integer (``sed -i -E '6s/ [-+*\\/] / - /'
/app/*.py``), whichever of the bug, the fix or the decoy is there, so a second one undoes the
first: an agent that tries one, runs the tests and reads that they fail can still fix the
bug. Like level 1's, the commands name no identifier (the module is ``/app/*.py``). With
``fix_files`` each rewrite is a sed script of the task instead (``/app/fixes/1.sed``, applied by
``sed -i -E -f /app/fixes/1.sed /app/*.py``), so the candidate commands of all tasks are the
same two and choosing one, or switching to the other after a failed test run, is one token:
what the agent has to get right is the decision, not copying a pattern. Editing
without verifying succeeds one time in two; verifying and correcting always does. Which of
the two is correct is drawn per task (:func:`rewritten`: one time in two the decoy's rewrite
is the correct code, the expected values computed from it, and the template's fix is the
decoy), so the fix cannot be told from the candidates either: held-out tasks reuse the
templates' sites, and with a fixed fix per site a policy that remembered each candidate set's
fix scored 0.97 on 128 held-out tasks without testing (generator version 8; the blind
baseline of :func:`lego_rl.engine.evaluate.blind_baseline`, which the report prints).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

VISIBLE_TESTS_PATH = "tests/run_tests.py"
"""Where the visible tests live, relative to /app (outside the ``/app/*.py`` the fixes edit)."""
CHECK_COMMAND = f"python3 /app/{VISIBLE_TESTS_PATH}"
"""How the agent runs the visible tests (named in the instruction and the task's metadata)."""
FIX_SCRIPT_PATH = "fixes/{n}.sed"
"""Where candidate ``n`` (from 1) lives as a sed script with ``fix_files``, relative to /app."""

SWAPS: tuple[tuple[str, ...], ...] = (
    ("<=", ">=", "<", ">", "==", "!="),
    ("+", "-", "*", "/"),
)
"""Tokens a decoy may put in place of one another (integers move by one or two instead)."""


@dataclass(frozen=True)
class TokenClass:
    """The tokens a rewrite matches: every comparison, every spaced arithmetic operator or
    every integer, so the commands of all tasks share a handful of patterns."""

    sed: str
    """The extended regular expression in the command."""
    python: re.Pattern[str]
    """The same as Python reads it (the simulation that checks each rewrite)."""
    spaced: bool = False
    """The match includes one space each side (binary operators)."""

    def replacement(self, target: str) -> str:
        """What a match becomes when it is rewritten to ``target``."""
        return f" {target} " if self.spaced else target


COMPARISON = TokenClass("(<=|>=|==|!=|<|>)", re.compile(r"<=|>=|==|!=|<|>"))
ARITHMETIC = TokenClass(r" [-+*\/] ", re.compile(r" [-+*/] "), spaced=True)
INTEGER = TokenClass("[0-9]+", re.compile(r"[0-9]+"))


def token_class(token: str) -> TokenClass | None:
    """The class a bug's or fix's token belongs to; None for one no rewrite can match."""
    if token in SWAPS[0]:
        return COMPARISON
    if token in SWAPS[1]:
        return ARITHMETIC
    return INTEGER if token.isdigit() else None


@dataclass(frozen=True)
class Candidates:
    """The level-4 parts of a task: the commands in instruction order and the visible tests."""

    commands: tuple[str, ...]
    """One-token rewrites of the buggy line; exactly one gives the fixed module."""
    correct: int
    """Index of the fix in ``commands``."""
    decoy: str
    """The decoy's token."""
    tests_source: str
    """``/app/tests/run_tests.py``."""
    scripts: tuple[str, ...] = ()
    """With ``fix_files``: the sed script of each command, in the same order."""


def alternatives(token: str, bug: str) -> list[str]:
    """Decoy tokens for the fix ``token`` (not the bug's): swaps of its kind, integers +-1, +2."""
    if token.isdigit():
        others = [str(int(token) + d) for d in (1, -1, 2) if int(token) + d >= 0]
    else:
        others = next((list(group) for group in SWAPS if token in group), [])
    return [o for o in others if o not in (token, bug)]


def rewrite_expression(line_number: int, cls: TokenClass, target: str) -> str:
    """``Ns/CLASS/target/``: the first token of ``cls`` on line N becomes ``target``."""
    replacement = re.sub(r"([\\&/])", r"\\\1", cls.replacement(target))
    return f"{line_number}s/{cls.sed}/{replacement}/"


def rewrite_command(line_number: int, cls: TokenClass, target: str) -> str:
    """``sed -i -E 'Ns/CLASS/target/' /app/*.py``: :func:`rewrite_expression` on the module."""
    return f"sed -i -E '{rewrite_expression(line_number, cls, target)}' /app/*.py"


def script_command(n: int) -> str:
    """``sed -i -E -f /app/fixes/N.sed /app/*.py``: candidate ``n``'s script on the module."""
    return f"sed -i -E -f /app/{FIX_SCRIPT_PATH.format(n=n)} /app/*.py"


def apply_rewrite(line: str, cls: TokenClass, target: str) -> str:
    """What :func:`rewrite_command` does to its line: the first match replaced."""
    replacement = cls.replacement(target)
    return cls.python.sub(lambda _: replacement, line, count=1)


def rewritten(fixed_source: str, buggy_source: str, line_number: int, target: str) -> str:
    """``fixed_source`` with line ``line_number``'s differing token (the first of its class)
    rewritten to ``target``: another candidate as the correct code."""
    lines = fixed_source.splitlines(keepends=True)
    buggy_line = buggy_source.splitlines(keepends=True)[line_number - 1]
    cls = token_class(target)
    if cls is None or apply_rewrite(buggy_line, cls, target) == buggy_line:
        raise ValueError(f"{target!r} rewrites nothing on line {line_number}")
    lines[line_number - 1] = apply_rewrite(buggy_line, cls, target)
    return "".join(lines)


def draw_candidates(
    *,
    rng: random.Random,
    bug: str,
    fix: str,
    buggy_source: str,
    fixed_source: str,
    line_number: int,
    module: str,
    function: str,
    cases: list[tuple[Any, ...]],
    expected: list[Any],
    fails: Callable[[str], bool],
    decoys: list[str] | None = None,
    fix_files: bool = False,
) -> Candidates | None:
    """The fix and a drawn decoy for one bug, or None when there is none.

    ``bug`` and ``fix`` are the differing tokens of the buggy and fixed line (of one
    :class:`TokenClass`); ``cases`` the visible cases and ``expected`` the fixed module's
    answers; ``fails(source)`` says whether module ``source`` gets a visible case wrong. A
    decoy must fail a visible case, and each rewrite must give its line from the buggy, the
    fixed and the decoy line. ``decoys``: the tokens to draw from (default :func:`alternatives`);
    ``fix_files``: each candidate a script (:data:`FIX_SCRIPT_PATH`), the commands the same for
    every task.
    """
    cls = token_class(fix)
    if cls is None or token_class(bug) is not cls:
        return None
    lines = buggy_source.splitlines(keepends=True)
    buggy_line, fixed_line = lines[line_number - 1], fixed_source.splitlines(keepends=True)[line_number - 1]
    if apply_rewrite(buggy_line, cls, fix) != fixed_line:
        return None  # the class's first match on the line is not the bug
    usable = []
    for decoy in alternatives(fix, bug) if decoys is None else decoys:
        decoy_line = apply_rewrite(fixed_line, cls, decoy)
        starts = (buggy_line, fixed_line, decoy_line)
        if all(apply_rewrite(s, cls, fix) == fixed_line for s in starts) and all(
            apply_rewrite(s, cls, decoy) == decoy_line for s in starts
        ) and decoy_line not in (buggy_line, fixed_line):
            if fails("".join(lines[: line_number - 1] + [decoy_line] + lines[line_number:])):
                usable.append(decoy)
    if not usable:
        return None
    decoy = rng.choice(usable)
    targets = [fix, decoy]
    rng.shuffle(targets)
    scripts = tuple(f"{rewrite_expression(line_number, cls, t)}\n" for t in targets) if fix_files else ()
    return Candidates(
        commands=tuple(
            script_command(n) if fix_files else rewrite_command(line_number, cls, t) for n, t in enumerate(targets, 1)
        ),
        correct=targets.index(fix),
        decoy=decoy,
        tests_source=visible_tests(module, function, cases, expected),
        scripts=scripts,
    )


def visible_tests(module: str, function: str, cases: list[tuple[Any, ...]], expected: list[Any]) -> str:
    """The agent's test script: ``function`` on each case against the fixed module's answer."""
    return VISIBLE_TESTS.format(module=module, function=function, cases=repr(cases), expected=repr(expected))


def instruction_hint(candidates: Candidates, line_number: int, buggy_line: str) -> str:
    """The instruction's level-4 paragraph: the line, the candidate commands, the check."""
    listed = "\n".join(f"`{c}`" for c in candidates.commands)
    return (
        f"The bug is on line {line_number}, `{buggy_line}`. One of these commands fixes it:\n"
        f"{listed}\n`{CHECK_COMMAND}` runs the tests."
    )


VISIBLE_TESTS = '''"""Tests of {module}.{function}: `python3 /app/tests/run_tests.py` (exit status 0: all pass)."""

import math
import os
import sys

sys.dont_write_bytecode = True  # no stale .pyc for a module edited within the same second
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = {cases}
EXPECTED = {expected}


def same(got, want):
    if isinstance(want, float):
        return isinstance(got, (int, float)) and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
    return type(got) is type(want) and got == want


def main():
    try:
        from {module} import {function}
    except Exception as exc:
        print(f"FAILED: importing {module} raised {{type(exc).__name__}}")
        return 1
    failed = 0
    for args, want in zip(CASES, EXPECTED):
        try:
            got = {function}(*args)
        except Exception as exc:
            got = f"raises {{type(exc).__name__}}"
        if not same(got, want):
            failed += 1
            print(f"FAIL {function}{{args!r}}: got {{got!r}}, expected {{want!r}}")
    print(f"FAILED: {{failed}} of {{len(CASES)}}" if failed else f"PASSED: {{len(CASES)}} of {{len(CASES)}}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
'''
