"""Print generated bug-fix tasks for a person to read: ``python -m legorl_std.tasks.bugfix -n 3``."""

from __future__ import annotations

import argparse
import sys

from legorl_std.tasks.bugfix.generate import generate_tasks
from legorl_std.tasks.bugfix.model import BUG_KINDS, DEFAULT_LEVELS, LEVELS, SPLITS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m legorl_std.tasks.bugfix", description=__doc__)
    parser.add_argument("-n", "--count", type=int, default=3, help="how many tasks (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", choices=SPLITS, default="train")
    parser.add_argument("--levels", type=int, nargs="+", choices=LEVELS, default=list(DEFAULT_LEVELS))
    parser.add_argument("--kinds", nargs="+", choices=BUG_KINDS, default=list(BUG_KINDS))
    args = parser.parse_args(argv)
    for task in generate_tasks(args.count, args.seed, args.split, args.levels, args.kinds):
        print(f"=== {task.name}  level {task.level}  {task.kind}  ({task.module}.py line {task.line_number})")
        print(task.instruction)
        print(f"--- /app/{task.module}.py")
        print(task.buggy_source)
        print(f"--- oracle\n{task.oracle_command}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
