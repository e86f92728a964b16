"""Generated one-bug Python tasks of graded difficulty, in Harbor format (task source ``bugfix``).

Each task is a tiny module (one or two functions) with exactly one injected bug of a kind
(wrong operator, off-by-one, wrong constant, swapped arguments, wrong comparison, wrong
return variable) at level 1 (the instruction names the wrong token and, last, the one `sed`
command that fixes it), 2 (it says what the function should return), 3 (only a failing
example) or 4 (the line and two candidate fixes, told apart only by the visible tests the
agent can run, given inline as sed commands or, with ``fix_files``, as sed scripts in
``/app/fixes/``; see :mod:`legorl_std.tasks.bugfix.candidates`). Tasks are deterministic in
(seed, split, index); the held-out split draws from identifiers disjoint from train's.
"""

from legorl_std.tasks.bugfix.generate import (
    BugfixTask,
    GeneratorError,
    generate_task,
    generate_tasks,
)
from legorl_std.tasks.bugfix.harbor import ensure_tasks, task_files, write_task
from legorl_std.tasks.bugfix.model import BUG_KINDS, DEFAULT_LEVELS, LEVELS, SPLITS, BugKind

__all__ = [
    "BUG_KINDS",
    "DEFAULT_LEVELS",
    "LEVELS",
    "SPLITS",
    "BugKind",
    "BugfixTask",
    "GeneratorError",
    "ensure_tasks",
    "generate_task",
    "generate_tasks",
    "task_files",
    "write_task",
]
