"""Level 4 of the bug-fix tasks: candidate fixes that only running the tests tells apart.

The instruction names the buggy line and two whole-line rewrites of it, the fix and a decoy
(the fixed line with another operator, comparison or integer where the bug is), in random order, and the
command that runs the visible tests (``/app/run_tests.py``: the bugged function's cases; the
hidden tests that give the reward check every function). Each rewrite replaces the whole
line, so a second one undoes the first: an agent that tries one, runs the tests and reads
that they fail can still fix the bug. Editing without verifying succeeds as often as it
guesses (one in two); verifying and correcting always does.
"""

from __future__ import annotations

import random
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CHECK_COMMAND = "python3 /app/run_tests.py"
"""How the agent runs the visible tests (named in the instruction and the task's metadata)."""

SWAPS: tuple[tuple[str, ...], ...] = (
    ("<=", ">=", "<", ">", "==", "!="),
    ("+", "-", "*"),
)
"""Tokens a decoy may put in place of one another (integers move by one or two instead)."""
_TOKEN = re.compile(r"<=|>=|==|!=|[<>+\-*]|\b\d+\b")


@dataclass(frozen=True)
class Candidates:
    """The level-4 parts of a task: the commands in instruction order and the visible tests."""

    commands: tuple[str, ...]
    """Whole-line rewrites of the buggy line; exactly one gives the fixed module."""
    correct: int
    """Index of the fix in ``commands``."""
    tests_source: str
    """``/app/run_tests.py``."""


def decoy_lines(fixed_line: str, buggy_line: str) -> list[str]:
    """Lines that differ from ``fixed_line`` in one swappable token (see :data:`SWAPS`) where it
    differs from ``buggy_line``: the fix and the decoy then each change the buggy line at the
    same place, so neither is told by being the closer one to it."""
    prefix = 0
    while prefix < min(len(fixed_line), len(buggy_line)) and fixed_line[prefix] == buggy_line[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(fixed_line), len(buggy_line)) - prefix and fixed_line[-1 - suffix] == buggy_line[-1 - suffix]:
        suffix += 1
    lo, hi = prefix, len(fixed_line) - suffix
    out = []
    for match in _TOKEN.finditer(fixed_line):
        if match.end() <= lo or match.start() >= max(hi, lo + 1):
            continue  # outside the changed span (an insertion's span is widened to one char)
        token = match.group()
        if token.isdigit():
            others = [str(int(token) + d) for d in (1, -1, 2) if int(token) + d >= 0]
        else:
            others = next((list(group) for group in SWAPS if token in group), [])
        for other in others:
            line = fixed_line[: match.start()] + other + fixed_line[match.end() :]
            if other != token and line != buggy_line:
                out.append(line)
    return out


def rewrite_command(line_number: int, line: str, module: str) -> str:
    """``sed -i 'Ns|.*|LINE|' /app/MODULE.py``: line N becomes ``line`` (indentation kept)."""
    delimiter = next((d for d in "|#/@%" if d not in line), "|")
    replacement = re.sub(rf"([\\&{re.escape(delimiter)}])", r"\\\1", line)
    expression = f"{line_number}s{delimiter}.*{delimiter}{replacement}{delimiter}"
    quoted = f"'{expression}'" if "'" not in expression else shlex.quote(expression)
    return f"sed -i {quoted} /app/{module}.py"


def with_line(source: str, line_number: int, line: str) -> str:
    """``source`` with line ``line_number`` (1-based) replaced: what a rewrite command does."""
    lines = source.splitlines(keepends=True)
    lines[line_number - 1] = line + "\n"
    return "".join(lines)


def draw_candidates(
    *,
    rng: random.Random,
    module: str,
    function: str,
    buggy_source: str,
    fixed_source: str,
    line_number: int,
    cases: list[tuple[Any, ...]],
    expected: list[Any],
    fails: Callable[[str, tuple[Any, ...]], bool],
) -> Candidates | None:
    """The fix and a drawn decoy for one bug, or None when no decoy fails a visible case.

    ``cases`` are the visible cases and ``expected`` the fixed module's answers to them;
    ``fails(source, args)`` says whether ``function`` of the module ``source`` gets a case
    wrong. The decoy must fail at least one visible case and differ from the buggy module.
    """
    fixed_full = fixed_source.splitlines()[line_number - 1]
    buggy_full = buggy_source.splitlines()[line_number - 1]
    decoys = [
        line for line in decoy_lines(fixed_full, buggy_full)
        if (source := with_line(fixed_source, line_number, line)) != buggy_source
        and any(fails(source, args) for args in cases)
    ]  # fmt: skip
    if not decoys:
        return None
    lines = [fixed_full, rng.choice(decoys)]
    rng.shuffle(lines)
    return Candidates(
        commands=tuple(rewrite_command(line_number, line, module) for line in lines),
        correct=lines.index(fixed_full),
        tests_source=visible_tests(module, function, cases, expected),
    )


def visible_tests(module: str, function: str, cases: list[tuple[Any, ...]], expected: list[Any]) -> str:
    """The agent's test script: ``function`` on each case against the fixed module's answer."""
    return VISIBLE_TESTS.format(module=module, function=function, cases=repr(cases), expected=repr(expected))


def instruction_hint(candidates: Candidates, line_number: int, buggy_line: str) -> str:
    listed = "\n".join(f"`{c}`" for c in candidates.commands)
    return (
        f"The bug is on line {line_number}, `{buggy_line}`. One of these commands fixes it:\n"
        f"{listed}\n`{CHECK_COMMAND}` runs the tests."
    )


VISIBLE_TESTS = '''"""Tests of {module}.{function}: `python3 /app/run_tests.py` (exit status 0: all pass)."""

import math
import os
import sys

sys.dont_write_bytecode = True  # no stale .pyc for a module edited within the same second
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

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
