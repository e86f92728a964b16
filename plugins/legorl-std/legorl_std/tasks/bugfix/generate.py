"""One generated task from (seed, split, index): a module with one bug, its tests, its oracle.

Everything is computed, not trusted: the expected values come from running the correct
module, the instruction's example is a case the buggy module really gets wrong, and a
template whose bug fails fewer than two cases (so a hard-coded special case would pass) is
an error.
"""

from __future__ import annotations

import copy
import math
import random
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from legorl_std.tasks.bugfix import candidates as level4
from legorl_std.tasks.bugfix.model import BUG_KINDS, DEFAULT_LEVELS, LEVELS, SPLITS, Bug, Template
from legorl_std.tasks.bugfix.templates import TEMPLATES

MAX_ATTEMPTS = 64
"""Draws per index before a duplicate of an earlier task is accepted."""
_TOKEN = re.compile(r"\w+|\s+|>=|<=|==|!=|\*\*|//|[^\w\s]")


class GeneratorError(ValueError):
    """A template or an option cannot give a valid task; the message says which."""


class NoDecoy(GeneratorError):
    """A bug site has no level-4 decoy fix (no swappable token, or none that fails a visible
    case and can be rewritten unambiguously)."""


@dataclass(frozen=True)
class BugfixTask:
    """One generated task, before it is written as a Harbor directory."""

    name: str
    seed: int
    split: str
    index: int
    level: int
    kind: str
    module: str
    function: str
    buggy_source: str
    fixed_source: str
    tests_source: str
    instruction: str
    line_number: int
    buggy_line: str
    fixed_line: str
    oracle_command: str
    candidate_commands: tuple[str, ...] = ()
    """Level 4: the instruction's candidate fixes, in its order (one is the oracle)."""
    check_command: str = ""
    """Level 4: the command that runs the visible tests (``/app/tests/run_tests.py``)."""
    visible_tests_source: str = ""
    fix_scripts: tuple[str, ...] = ()
    """Level 4 with ``fix_files``: candidate n's sed script (``/app/fixes/n.sed``) at n-1."""


def generate_tasks(
    count: int,
    seed: int = 0,
    split: str = "train",
    levels: Sequence[int] = DEFAULT_LEVELS,
    kinds: Sequence[str] = BUG_KINDS,
    fix_files: bool = False,
) -> list[BugfixTask]:
    """Tasks 0..count-1; task i depends only on (seed, split, levels, kinds, fix_files, i).

    An index redraws (up to MAX_ATTEMPTS times) while its buggy module repeats an earlier one.
    """
    _check(split, levels, kinds)
    seen: set[str] = set()
    tasks = []
    for index in range(count):
        for attempt in range(MAX_ATTEMPTS):
            task = generate_task(seed, split, index, levels, kinds, attempt, fix_files=fix_files)
            if task.buggy_source not in seen:
                break
        seen.add(task.buggy_source)
        tasks.append(task)
    return tasks


def generate_task(
    seed: int,
    split: str,
    index: int,
    levels: Sequence[int] = DEFAULT_LEVELS,
    kinds: Sequence[str] = BUG_KINDS,
    attempt: int = 0,
    *,
    fix_files: bool = False,
) -> BugfixTask:
    """Level and kind cycle with the index (every pair appears); the rest is drawn.

    At level 4 a bug site with no decoy (see :mod:`legorl_std.tasks.bugfix.candidates`) is passed
    over for the next drawn one of the kind; ``fix_files`` ships its candidates as sed scripts."""
    _check(split, levels, kinds)
    level = levels[index % len(levels)]
    kind = kinds[(index // len(levels)) % len(kinds)]
    rng = random.Random(f"bugfix:{seed}:{split}:{index}:{attempt}")
    sites = [(t, b) for t in TEMPLATES for b in t.bugs if b.kind == kind]
    if level == 4:
        rng.shuffle(sites)  # every site in a drawn order: the first with a decoy
    else:
        sites = [rng.choice(sites)]
    for template, bug in sites:
        try:
            names = draw_names(template, split, rng)
            return build_task(template, bug, names, level, rng, seed=seed, split=split, index=index, fix_files=fix_files)
        except NoDecoy:
            continue
    raise GeneratorError(f"bug kind {kind!r} has no site with a decoy fix, so it cannot make level-4 tasks")


def draw_names(template: Template, split: str, rng: random.Random) -> dict[str, str]:
    pools = {ph: choices[SPLITS.index(split)] for ph, choices in sorted(template.names.items())}
    names = {ph: rng.choice(pool) for ph, pool in pools.items()}
    if len(set(names.values())) != len(names):
        # Two placeholders drew the same identifier: take each one's first unused choice.
        used: set[str] = set()
        for ph, pool in pools.items():
            names[ph] = next(n for n in (names[ph], *pool) if n not in used)
            used.add(names[ph])
    return names


def build_task(
    template: Template,
    bug: Bug,
    names: dict[str, str],
    level: int,
    rng: random.Random,
    *,
    seed: int = 0,
    split: str = "train",
    index: int = 0,
    fix: str | None = None,
    decoy: str | None = None,
    fix_files: bool = False,
) -> BugfixTask:
    """Render one (template, bug, names, level) and check it fails as intended.

    At level 4 the correct code is, one time in two, the decoy's rewrite of the fixed line
    (``fix``, with ``decoy`` the template's fix), so which candidate fixes a site is
    drawn per task: remembering a site's fix does not tell it, only running the tests does."""
    functions = _kept(template, bug.call) if level in (1, 4) else list(template.functions)
    fixed_source = f'"""{template.doc}"""\n\n\n' + "\n\n".join(f.code.format(**names) for f in functions)
    if level == 4:  # the template's docstring tells its fix; here either candidate may be correct
        fixed_source = re.sub(
            rf'(def {re.escape(names[bug.call])}\(.*\n\s+)""".*"""', r'\1"""What its tests expect."""', fixed_source, count=1
        )
    fixed_frag, buggy_frag = bug.fixed.format(**names), bug.buggy.format(**names)
    if fixed_source.count(fixed_frag) != 1:
        raise GeneratorError(f"template {template.doc!r}: {fixed_frag!r} must occur exactly once")
    buggy_source = fixed_source.replace(fixed_frag, buggy_frag)
    line_number = fixed_source[: fixed_source.index(fixed_frag)].count("\n") + 1
    if fix is not None:
        fixed_source = level4.rewritten(fixed_source, buggy_source, line_number, fix)
    fixed_line = fixed_source.splitlines()[line_number - 1].strip()
    buggy_line = buggy_source.splitlines()[line_number - 1].strip()
    module, function = names["mod"], names[bug.call]

    correct, broken = _load(fixed_source), _load(buggy_source)
    cases = [(names[f.call], args) for f in functions for args in f.cases]
    expected = {i: _outcome(correct, fn, args) for i, (fn, args) in enumerate(cases)}
    if any(_raises(v) for v in expected.values()):
        raise GeneratorError(f"template {template.doc!r}, bug {bug}, fix {fix!r}: the correct code raises on a case")
    failing = [
        i for i, (fn, args) in enumerate(cases)
        if fn == function and not _same(_outcome(broken, fn, args), expected[i])
    ]
    if len(failing) < 2:
        raise GeneratorError(f"template {template.doc!r}, bug {bug}: fails {len(failing)} case(s), needs 2")
    short = [i for i in failing if len(repr(expected[i])) + len(repr(_outcome(broken, *cases[i]))) <= 16]
    example = rng.choice(short or failing)  # short values read better in an instruction
    bad, good = _token_diff(buggy_line, fixed_line)
    expression = next(
        (sed_expression(old, new) for old, new in ((bad, good), (buggy_line, fixed_line))
         if _apply_sed(buggy_source, old, new) == fixed_source),
        None,
    )  # fmt: skip
    if expression is None and level != 4:
        raise GeneratorError(f"template {template.doc!r}, bug {bug}: the oracle sed is ambiguous")

    oracle = oracle_command(expression) if expression is not None else ""
    fn, args = cases[example]
    call = f"{fn}({', '.join(map(repr, args))})"
    got = _outcome(broken, fn, args)
    wrong = f"raises `{got[1]}`" if _raises(got) else f"returns `{got!r}`"
    first = f"In `/app/{module}.py`, `{call}` {wrong} instead of `{expected[example]!r}`."
    choice = None
    if level == 4:
        visible = [(args, expected[i]) for i, (f, args) in enumerate(cases) if f == function]

        def fails_visible(source: str) -> bool:
            module_ns = _load(source)
            return any(not _same(_outcome(module_ns, function, args), want) for args, want in visible)

        choice = level4.draw_candidates(
            rng=rng, bug=bad, fix=good, buggy_source=buggy_source, fixed_source=fixed_source,
            line_number=line_number, module=module, function=function,
            cases=[args for args, _ in visible], expected=[want for _, want in visible], fails=fails_visible,
            decoys=None if decoy is None else [decoy], fix_files=fix_files,
        )  # fmt: skip
        if choice is None:
            raise NoDecoy(f"template {template.doc!r}, bug {bug}: no one-token decoy fix fails a visible case")
        if fix is None and rng.random() < 0.5:
            try:  # the decoy is the correct code, the template's fix the decoy
                return build_task(template, bug, names, level, rng, seed=seed, split=split, index=index,
                                  fix=choice.decoy, decoy=good, fix_files=fix_files)  # fmt: skip
            except ValueError:  # GeneratorError included
                pass  # that code raises on a case or the bug fails too few of its cases: the template's fix stays
        oracle = choice.commands[choice.correct]
    if level == 1:
        hint = f"The bug is on the line `{buggy_line}`: `{bad}` should be `{good}`; `{oracle}` fixes it."
    elif choice is not None:
        hint = level4.instruction_hint(choice, line_number, buggy_line)
    elif level == 2:
        purpose = template.function(bug.call).purpose.format(**names)
        hint = f"Fix `{function}` so that it returns {purpose}."
    else:
        hint = "Find the bug and fix it."
    return BugfixTask(
        name=f"bugfix-{split}-{index:04d}",
        seed=seed,
        split=split,
        index=index,
        level=level,
        kind=bug.kind,
        module=module,
        function=function,
        buggy_source=buggy_source,
        fixed_source=fixed_source,
        tests_source=_tests(module, sorted({c[0] for c in cases}), cases, expected),
        instruction=f"{first}\nChange only `{module}.py`.\n\n{hint}\n",
        line_number=line_number,
        buggy_line=buggy_line,
        fixed_line=fixed_line,
        oracle_command=oracle,
        candidate_commands=choice.commands if choice else (),
        check_command=level4.CHECK_COMMAND if choice else "",
        visible_tests_source=choice.tests_source if choice else "",
        fix_scripts=choice.scripts if choice else (),
    )


def sed_expression(old: str, new: str) -> str:
    """The sed expression replacing ``old`` by ``new`` (the first match on each line)."""
    pattern = re.sub(r"([\\/.*\[\]^$])", r"\\\1", old)
    replacement = re.sub(r"([\\/&])", r"\\\1", new)
    return f"s/{pattern}/{replacement}/"


def oracle_command(expression: str) -> str:
    """One shell command that fixes the bug: ``sed -i EXPRESSION /app/*.py`` (the task's only
    module). The expression replaces the wrong token alone where that is unambiguous, else the
    whole buggy line; naming the module by the glob keeps identifiers out of it where they can
    be, so a demonstration teaches the edit, not a file name."""
    quoted = f"'{expression}'" if "'" not in expression else shlex.quote(expression)  # one form to learn
    return f"sed -i {quoted} /app/*.py"


def _check(split: str, levels: Sequence[int], kinds: Sequence[str]) -> None:
    if split not in SPLITS:
        raise GeneratorError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if not levels or any(level not in LEVELS for level in levels):
        raise GeneratorError(f"levels must be a non-empty subset of {list(LEVELS)}, got {list(levels)}")
    if not kinds or any(kind not in BUG_KINDS for kind in kinds):
        raise GeneratorError(f"kinds must be a non-empty subset of {list(BUG_KINDS)}, got {list(kinds)}")


def _kept(template: Template, call: str) -> list[Any]:
    keep = {call, *template.function(call).needs}
    return [f for f in template.functions if f.call in keep]


def _load(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<bugfix-template>", "exec"), namespace)  # noqa: S102 (our own templates only)
    return namespace


def _outcome(namespace: dict[str, Any], fn: str, args: tuple[Any, ...]) -> Any:
    try:
        return namespace[fn](*copy.deepcopy(args))
    except Exception as exc:  # noqa: BLE001 (a buggy module may raise; that is an outcome too)
        return ("raises", type(exc).__name__)


def _raises(outcome: Any) -> bool:
    return isinstance(outcome, tuple) and outcome[:1] == ("raises",)


def _same(got: Any, want: Any) -> bool:
    """The hidden tests' comparison: floats within 1e-9, anything else equal and same type."""
    if isinstance(want, float):
        return isinstance(got, int | float) and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
    return type(got) is type(want) and got == want


def _apply_sed(source: str, old: str, new: str) -> str:
    """What the oracle's sed does: the first match on each line is replaced."""
    return "".join(line.replace(old, new, 1) for line in source.splitlines(keepends=True))


def _token_diff(buggy: str, fixed: str) -> tuple[str, str]:
    """The smallest differing token spans (widened by a token when one side is empty)."""
    a, b = _TOKEN.findall(buggy), _TOKEN.findall(fixed)
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    lo = start
    while lo > 0 and (not "".join(a[lo : len(a) - end]).strip() or not "".join(b[lo : len(b) - end]).strip()):
        lo -= 1
    return "".join(a[lo : len(a) - end]).strip(), "".join(b[lo : len(b) - end]).strip()


def _tests(
    module: str, functions: list[str], cases: list[tuple[str, tuple[Any, ...]]], expected: dict[int, Any]
) -> str:
    checks = "".join(
        f"\n    def test_{i:02d}_{fn}(self):\n"
        f"        self.check({fn}({', '.join(map(repr, args))}), {expected[i]!r})\n"
        for i, (fn, args) in enumerate(cases)
    )
    return f'''"""Hidden tests of {module}.py (run by test.sh; exit status 0 means every test passed)."""

import math
import os
import sys
import unittest

sys.path.append(os.environ.get("APP", "/app"))

from {module} import {", ".join(functions)}


class HiddenTests(unittest.TestCase):
    def check(self, got, want):
        if isinstance(want, float):
            self.assertIsInstance(got, (int, float))
            self.assertTrue(math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9), f"{{got!r}} != {{want!r}}")
        else:
            self.assertEqual((type(got).__name__, got), (type(want).__name__, want))
{checks}

if __name__ == "__main__":
    unittest.main()
'''
