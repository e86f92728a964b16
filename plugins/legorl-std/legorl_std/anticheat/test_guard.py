"""Anti-cheat ``test-guard``: the hidden tests stay hidden, and nothing planted steers them.

- Before the agent: the task's tests and solution must not be visible inside (else the
  sandbox leaks them: an infrastructure error).
- Before the verifier: a file the agent added or changed that would run inside the test
  process or replace a tool is a violation: ``conftest.py``, ``sitecustomize.py``,
  ``usercustomize.py``, ``*.pth``, pytest configuration (``pytest.ini``, or pytest sections
  in ``pyproject.toml``/``setup.cfg``/``tox.ini``), a ``pytest11`` entry point, anything
  under ``/tests``, or an executable in a directory of the verifier's ``PATH``. Byte code the
  agent left (``*.pyc``) is not flagged: honest runs make it too, and it never crosses into
  verification (:mod:`lego_rl.crossing`), which is also what makes the hooks this guard does
  not name harmless.

The verifier itself runs with a clean environment (see ``legorl_std.verifier.test_script``), so a
planted ``PYTHONPATH``, user site or shell profile is never read.
"""

from __future__ import annotations

import posixpath
import shlex
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lego_rl.kinds import CheatDemo, Check, Sandbox, Task, Violation
from lego_rl.registry import BuildContext
from legorl_std.anticheat.common import CheckedPolicy, Clock, PolicyError, changed_paths, task_paths

HOOK_FILES = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py", "pytest.ini", ".pytest.ini"})
CONFIG_FILES = frozenset({"pyproject.toml", "setup.cfg", "tox.ini"})
CONFIGS_READ = 100
"""Configuration files the check greps; the agent's files past that many count as planted."""


class TestGuardOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(
        default_factory=list,
        description="In-sandbox paths the agent may add or change even if they look like hooks.",
    )


class TestGuard(CheckedPolicy):
    name = "test-guard"
    __test__ = False  # not a pytest class

    def __init__(self, allow: list[str] | None = None):
        self.allow = set(allow or [])
        self._clock = Clock()

    def before_agent_check(self, sandbox: Sandbox, task: Task) -> Check:
        script = (
            " ".join(  # an empty dir is what a hiding mount leaves
                f'[ -n "$(ls -A {shlex.quote(p)} 2>/dev/null)" ] && echo {shlex.quote(p)};'
                for p in ["/tests", *task_paths(task)]
            )
            + " true"
        )
        self._clock.mark(sandbox)  # before the check: a ctime window can only be wider

        def judge(text: str) -> list[Violation]:
            if visible := text.split():
                raise PolicyError(f"test-guard: the agent phase of {task.name} can see {visible}")
            return []

        return Check(self.name, script, judge)

    def before_verify_check(self, sandbox: Sandbox, task: Task) -> Check:
        changes = [
            (kind, path)
            for kind, path in changed_paths(sandbox, self._clock.since(sandbox))
            if path not in self.allow
        ]
        self._clock.forget(sandbox)
        present = [p for kind, p in changes if kind != "deleted"]
        configs = [p for p in present if posixpath.basename(p) in CONFIG_FILES or p.endswith("entry_points.txt")]
        grepped, unread = configs[:CONFIGS_READ], configs[CONFIGS_READ:]  # one command line holds so many
        script = (
            f"[ -z {shlex.quote(_quoted(grepped))} ] || grep -l -E 'pytest' -- {_quoted(grepped)} 2>/dev/null; "
            'echo "PATH=$PATH"'
        )

        def judge(text: str) -> list[Violation]:
            lines = text.splitlines()
            path_dirs = set(lines[-1].removeprefix("PATH=").split(":")) - {""} if lines else set()
            suspects = [p for p in present if _planted(p, path_dirs)] + lines[:-1] + unread
            return [Violation(self.name, f"planted {p}") for p in sorted(set(suspects))]

        return Check(self.name, script, judge)


    def cheat_demonstration(self, scratch: Path) -> CheatDemo:
        """A conftest.py planted beside the code, which pytest would load into the tests' run."""
        plant = "import pytest\n\n@pytest.hookimpl(tryfirst=True)\ndef pytest_runtest_call(item):\n    return True\n"
        return CheatDemo("before_verify", stage=f"printf %s {shlex.quote(plant)} > conftest.py", works="test -s conftest.py")


def _quoted(paths: list[str]) -> str:
    return " ".join(shlex.quote(p) for p in paths)


def _planted(path: str, path_dirs: set[str]) -> bool:
    name = posixpath.basename(path)
    return (
        name in HOOK_FILES
        or name.endswith(".pth")
        or path == "/tests"
        or path.startswith("/tests/")
        or posixpath.dirname(path) in path_dirs
    )


def build(options: TestGuardOptions, ctx: BuildContext) -> TestGuard:
    """Hidden tests stay hidden; planted conftest/sitecustomize/.pth/PATH shims are blocked."""
    return TestGuard(options.allow)


def register(register: Any) -> None:
    register("test-guard", build, options=TestGuardOptions)
