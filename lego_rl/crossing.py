"""What of the agent's work crosses into verification: a per-task policy over changed paths.

Verification runs in a fresh copy of the task's starting state; only the agent's change to
the task's files is applied there (see ``DESIGN.md``, trust boundaries). This module decides,
for each path the agent added, modified or deleted, whether it crosses, and says why it does
not: it is backend-independent, so every sandbox applies the same rule.

Safe defaults, which a task's ``[metadata.crossing]`` table can extend:

- only paths under the task's own files (the sandbox names them: the workdir and COPY
  targets) cross, and only regular files and deletions (no symlinks, FIFOs, devices);
- never: git metadata, test files, test-runner configuration, site customisation, byte code;
- only source and data files by extension (an allowlist: a configuration file name that a
  newer test runner learns to read does not cross, whatever it is called);
- never an added module that shadows one of the standard library or of the test tooling
  where its directory may be on ``sys.path``: a root (the workdir is), or any directory that is
  not a package of the task's starting state (``PYTHONPATH=src``, pytest's rootdir insertion);
- at most ``max_files`` files and ``max_bytes`` bytes, else :class:`CrossingLimit`.

``allow`` patterns cross even where a default rule would drop the path (the type and size
rules stay); ``deny`` patterns drop more; ``extensions`` adds source extensions. A pattern
without ``/`` matches a path's last component, one with ``/`` the whole in-sandbox path
(``fnmatch``: ``*`` also matches ``/``).
"""

from __future__ import annotations

import fnmatch
import posixpath
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from lego_rl.kinds import Task

FileType = Literal["file", "symlink", "dir", "other", "none"]
"""What the path is in the agent's copy (``none``: it was deleted)."""
ChangeKind = Literal["added", "modified", "deleted"]
"""How the agent changed the path."""
IsPackage = Callable[[str], bool]
"""Whether an in-sandbox directory holds ``__init__.py`` in the task's starting state."""

SOURCE_EXTENSIONS = frozenset(
    ".py .pyi .pyx .pxd .c .h .cc .cpp .cxx .hpp .hh .rs .go .java .kt .scala .rb .php .js .mjs "
    ".cjs .ts .tsx .jsx .vue .swift .m .cs .fs .hs .ml .ex .exs .erl .clj .lua .r .jl .sh .bash "
    ".sql .txt .md .rst .csv .tsv .json .yaml .yml .xml .html .htm .css .scss .svg .tmpl .j2".split()
)
"""Extensions of files that may cross by default: code and the data it reads."""

GIT_NAMES = frozenset({".git", ".gitattributes", ".gitmodules", ".gitconfig"})
RUNNER_CONFIG = frozenset(
    {
        "conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini",
        "setup.cfg", "pyproject.toml", "noxfile.py", ".coveragerc", ".pdbrc", "sitecustomize.py",
        "usercustomize.py", "package.json", ".mocharc.json", ".mocharc.yml", ".mocharc.yaml",
        "jest.config.js", "jest.config.ts", "vitest.config.js", "vitest.config.ts", "Cargo.toml",
        "go.mod", ".env", ".envrc", ".python-version",
    }
)  # fmt: skip
"""Files a test runner, an interpreter or a shell reads on its own (never crossing)."""
RUNNER_PATTERNS = ("*.pth", "*.pyc", "*.pyo", "*/__pycache__/*", "*.egg-link", "*.dist-info/*")
TEST_PATTERNS = ("test_*.py", "*_test.py", "tests.py", "*/tests/*", "*/test/*")
"""Test files by name: the task's tests come from the task, never from the agent."""
TEST_TOOLING = frozenset(
    {
        "pytest", "_pytest", "pluggy", "py", "iniconfig", "hypothesis", "coverage", "xdist",
        "nose", "nose2", "mock", "packaging", "tomli", "exceptiongroup", "typing_extensions",
        "attr", "attrs", "six", "setuptools", "pkg_resources", "pip", "_distutils_hack",
    }
)  # fmt: skip
SHADOWED = frozenset(sys.stdlib_module_names) | TEST_TOOLING
"""Module names an added file must not take: it would be imported instead of the real one."""


class CrossingLimit(Exception):
    """The agent's change cannot cross: more files or bytes than the budget, or files the
    verification copy cannot hold (the policy's doing)."""


@dataclass(frozen=True)
class FileChange:
    """One path the agent changed (in-sandbox, absolute), as the crossing rules see it."""

    path: str
    kind: ChangeKind
    type: FileType = "file"
    size: int = 0


@dataclass
class Crossing:
    """The decision: what crosses, and what was dropped with the rule that dropped it."""

    crossed: list[FileChange] = field(default_factory=list)
    dropped: list[tuple[FileChange, str]] = field(default_factory=list)

    def summary(self, listed: int = 50) -> dict[str, Any]:
        """What a trial records: counts, and the first paths of each list."""
        return {
            "crossed": len(self.crossed),
            "dropped": len(self.dropped),
            "crossed_paths": [f"{c.kind[0].upper()} {c.path}" for c in self.crossed[:listed]],
            "dropped_paths": [f"{c.kind[0].upper()} {c.path}: {why}" for c, why in self.dropped[:listed]],
        }


@dataclass(frozen=True)
class CrossingPolicy:
    """The rules of one task; :meth:`for_task` reads its ``[metadata.crossing]`` table."""

    roots: tuple[str, ...]
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    extensions: frozenset[str] = SOURCE_EXTENSIONS
    max_files: int = 2000
    max_bytes: int = 64 << 20

    @classmethod
    def for_task(cls, task: Task, roots: Iterable[str]) -> CrossingPolicy:
        table = task.config.get("metadata", {}).get("crossing", {})
        if not isinstance(table, dict):
            raise ValueError(f"task {task.name}: [metadata.crossing] must be a table")
        unknown = set(table) - {"allow", "deny", "extensions", "max_files", "max_bytes"}
        if unknown:
            raise ValueError(f"task {task.name}: unknown [metadata.crossing] keys {sorted(unknown)}")
        extra = {f".{e.lstrip('.')}" for e in _strings(table, "extensions", task)}
        return cls(
            roots=tuple(sorted({posixpath.normpath(r) for r in roots})),
            allow=_strings(table, "allow", task),
            deny=_strings(table, "deny", task),
            extensions=SOURCE_EXTENSIONS | extra,
            max_files=int(table.get("max_files", cls.max_files)),
            max_bytes=int(table.get("max_bytes", cls.max_bytes)),
        )

    def decide(self, changes: Sequence[FileChange], is_package: IsPackage | None = None) -> Crossing:
        """Split ``changes``; raises :class:`CrossingLimit` past the budget. ``is_package(dir)``:
        whether an in-sandbox directory is a package (holds ``__init__.py``) in the task's
        starting state; without it every directory is taken to be possibly on ``sys.path``."""
        crossing = Crossing()
        size = 0
        for change in sorted(changes, key=lambda c: c.path):
            why = self.rule(change, is_package)
            if why:
                crossing.dropped.append((change, why))
                continue
            crossing.crossed.append(change)
            size += change.size
        if len(crossing.crossed) > self.max_files:
            raise CrossingLimit(f"the agent changed {len(crossing.crossed)} files (at most {self.max_files} cross)")
        if size > self.max_bytes:
            raise CrossingLimit(f"the agent's changed files hold {size} bytes (at most {self.max_bytes} cross)")
        return crossing

    def rule(self, change: FileChange, is_package: IsPackage | None = None) -> str:
        """Why ``change`` does not cross ('' if it does)."""
        path = change.path
        if not any(_under(path, root) for root in self.roots):
            return "outside the task's files"
        if change.type == "symlink" and not self._matches(self.allow, path):
            return "a symlink"
        if change.type in ("other", "dir"):
            return "not a regular file" if change.type == "other" else "a directory"
        if self._matches(self.allow, path):
            return ""
        return self._default_rule(change, is_package)

    def _default_rule(self, change: FileChange, is_package: IsPackage | None) -> str:
        path = change.path
        parts = path.split("/")
        name = parts[-1]
        if GIT_NAMES & set(parts):
            return "git metadata"
        if self._matches(self.deny, path):
            return "denied by the task"
        if _under(path, "/tests") or self._matches(TEST_PATTERNS, path):
            return "a test file"
        if name in RUNNER_CONFIG or self._matches(RUNNER_PATTERNS, path):
            return "test-runner configuration or site customisation"
        if change.kind != "deleted" and posixpath.splitext(name)[1].lower() not in self.extensions:
            return "not a source file (by extension)"
        if change.kind == "added" and (module := self._top_level_module(path, is_package)) in SHADOWED:
            return f"shadows the module {module!r}"
        return ""

    def _top_level_module(self, path: str, is_package: IsPackage | None) -> str:
        """The top-level module an added file defines if its directory is on ``sys.path`` (a
        file or a package in a root, ``/app/json.py``, ``/app/json/__init__.py``, or in a
        directory that is no package at the start, ``/app/src/pytest.py``), else ''."""
        parent, name = posixpath.split(path)
        if name == "__init__.py":
            parent, name = posixpath.split(parent)
            name += ".py"
        if parent in self.roots or is_package is None or not is_package(parent):
            return _module_name(name)
        return ""

    @staticmethod
    def _matches(patterns: Iterable[str], path: str) -> bool:
        name = posixpath.basename(path)
        return any(fnmatch.fnmatchcase(path if "/" in p else name, p) for p in patterns)


def _module_name(name: str) -> str:
    stem, ext = posixpath.splitext(name)
    return stem if ext in (".py", ".pyi", ".pyx", ".so", ".pyd") else ""


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _strings(table: dict[str, Any], key: str, task: Task) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"task {task.name}: [metadata.crossing] {key} must be a list of strings")
    return tuple(value)
