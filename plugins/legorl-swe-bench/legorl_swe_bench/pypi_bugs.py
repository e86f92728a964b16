"""Task source ``pypi-bugs``: real bugs of open-source Python projects, fixed upstream between
two PyPI releases, as SWE-bench tasks.

A shipped bug is a directory (``tasks/pypi-bugs/<id>/``): ``bug.toml`` (the project, the two
releases, where upstream records the fix, the issue-style statement, the test ids),
``repo/`` (the buggy release's files, trimmed), ``fix.patch`` (upstream's fix, only its
hunks) and ``test.patch`` (upstream's tests for it). Each becomes a local git mirror with the
buggy release as one commit and upstream's fix and tests as the next (the history a real
repository has), a SWE-bench instance on the first commit, and a Harbor task written by the
``swe-bench`` source's writer: a one-commit checkout, so the agent's repository holds no trace
of the fix, graded by the ``swe-bench`` verifier (FAIL_TO_PASS / PASS_TO_PASS through
swebench's pytest log parser and the test reporter's stream).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from legorl_std.tasks.cache import cache_root, cached_task_set
from legorl_std.tasks.harbor_dir import load_task
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lego_rl import hookimpl
from lego_rl.kinds import Problem, Task
from lego_rl.registry import BuildContext
from legorl_swe_bench.harbor import write_task
from legorl_swe_bench.instances import Instance, InstanceError

FORMAT_VERSION = 1
"""Bumped whenever the written mirrors or tasks change, so older caches are not reused."""
BUG_FILES = ("bug.toml", "fix.patch", "test.patch")
SHIPPED = Path(__file__).resolve().parents[3] / "tasks" / "pypi-bugs"
"""The bugs shipped with lego-rl's checkout (this plugin installed from it)."""
IMAGE = "legorl/base:bookworm"
"""Debian bookworm with python3 (3.11) and python3-pytest: what every shipped bug's tests need."""
GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
    "GIT_AUTHOR_NAME": "upstream", "GIT_AUTHOR_EMAIL": "upstream@pypi.invalid",
    "GIT_COMMITTER_NAME": "upstream", "GIT_COMMITTER_EMAIL": "upstream@pypi.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
}  # fmt: skip
"""Fixed names and dates: the same bug gives the same commits on every machine."""


class Bug(BaseModel):
    """``bug.toml``'s ``[bug]`` table."""

    model_config = ConfigDict(extra="forbid")

    project: str = Field(description="The PyPI distribution.")
    homepage: str = ""
    buggy_version: str = Field(description="The release repo/ holds.")
    fixed_version: str = Field(description="The first release with the fix.")
    license: str = Field(description="SPDX id; the license file is in repo/.")
    upstream_record: str = Field(description="Where upstream records the fix (its words).")
    test_cmd: str = Field(
        description="Run in the repository root; the test files of test.patch are appended. It keeps "
        "$PYTHONPATH (the verifier's test reporter is found there): PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} ..."
    )
    fail_to_pass: list[str] = Field(min_length=1)
    pass_to_pass: list[str] = Field(default_factory=list)
    problem_statement: str
    tests_written_by: str = Field(default="upstream", description="Who wrote test.patch's tests.")

    @field_validator("test_cmd")
    @classmethod
    def _keeps_pythonpath(cls, value: str) -> str:
        if re.search(r"\bPYTHONPATH=", value) and "$PYTHONPATH" not in value:
            raise ValueError(
                "test_cmd sets PYTHONPATH without keeping $PYTHONPATH, so pytest cannot load the verifier's "
                "test reporter: write PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}"
            )
        return value

    @field_validator("fail_to_pass", "pass_to_pass")
    @classmethod
    def _one_word_ids(cls, value: list[str]) -> list[str]:
        spaced = [test for test in value if len(test.split()) != 1]
        if spaced:
            raise ValueError(
                f"test ids with white space never match (swebench's pytest log parser cuts an id at its first "
                f"space; leave such tests out): {spaced[:3]}"
            )
        return value


class ShippedBug(BaseModel):
    """One bug directory, read."""

    id: str
    path: Path
    bug: Bug
    fix: str
    tests: str


def read_bug(path: Path) -> ShippedBug:
    """The bug in ``path``; :class:`InstanceError` names the file that is missing or wrong."""
    for name in (*BUG_FILES, "repo"):
        if not (path / name).exists():
            raise InstanceError(f"{path}: no {name} (a pypi-bugs directory holds {', '.join(BUG_FILES)} and repo/)")
    try:
        bug = Bug.model_validate(tomllib.loads((path / "bug.toml").read_text(encoding="utf-8"))["bug"])
    except (tomllib.TOMLDecodeError, KeyError, ValidationError) as exc:
        raise InstanceError(f"{path / 'bug.toml'}: not a bug description ([bug] table): {exc}") from exc
    return ShippedBug(
        id=path.name, path=path, bug=bug,
        fix=(path / "fix.patch").read_bytes().decode("utf-8"),  # as written: CRLF stays CRLF
        tests=(path / "test.patch").read_bytes().decode("utf-8"),
    )  # fmt: skip


def bug_dirs(root: Path) -> list[Path]:
    """Every bug directory under ``root`` (those with a ``bug.toml``), by name."""
    if not root.is_dir():
        raise InstanceError(f"pypi-bugs directory {root} does not exist (tasks.options.bugs)")
    return [d for d in sorted(root.iterdir()) if (d / "bug.toml").is_file()]


def build_mirror(bug: ShippedBug, dest: Path) -> str:
    """``dest`` := a bare repository of the bug's history: the buggy release, then upstream's fix
    and tests. Returns the buggy commit (the instance's base)."""
    work = dest.with_name(dest.name + ".work")
    shutil.copytree(bug.path / "repo", work, symlinks=True)
    _git(work, "init", "-q", "--initial-branch=main")
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", f"{bug.bug.project} {bug.bug.buggy_version}")
    base = _git(work, "rev-parse", "HEAD")
    for patch in (bug.fix, bug.tests):
        _git(work, "apply", "-p1", "--whitespace=nowarn", "-", stdin=patch)
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", f"{bug.bug.project} {bug.bug.fixed_version}: {bug.bug.upstream_record}")
    _git(dest.parent, "clone", "-q", "--bare", str(work), str(dest))
    shutil.rmtree(work)
    return base


def instance_of(bug: ShippedBug, base: str) -> Instance:
    """The SWE-bench instance of a shipped bug whose mirror's buggy commit is ``base``."""
    b = bug.bug
    return Instance(
        instance_id=bug.id, repo=f"pypi/{b.project}", base_commit=base, version=b.buggy_version,
        problem_statement=b.problem_statement, patch=bug.fix, test_patch=bug.tests,
        FAIL_TO_PASS=b.fail_to_pass, PASS_TO_PASS=b.pass_to_pass, test_cmd=b.test_cmd,
        log_parser="parse_log_pytest",
    )  # fmt: skip


class PypiBugsOptions(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"bugs": str(SHIPPED), "include": ["parse-*"]}]}
    )

    bugs: str = Field(description="Directory of bug directories (relative to the spec), e.g. the shipped tasks/pypi-bugs.")
    include: list[str] = Field(default_factory=list, description="Glob patterns of bug ids to keep.")
    exclude: list[str] = Field(default_factory=list, description="Glob patterns of bug ids to drop.")
    image: str = Field(
        default=IMAGE,
        description="The tasks' FROM image: Python 3.11 with pytest (lego-rl's offline Debian base by default).",
    )
    agent_timeout_sec: float = Field(default=1800.0, gt=0, description="task.toml [agent] timeout_sec.")
    verifier_timeout_sec: float = Field(default=300.0, gt=0, description="task.toml [verifier] timeout_sec.")
    dir: str | None = Field(
        default=None,
        description="Cache directory (relative to the spec); default <run dir>/pypi-bugs, "
        "or ~/.cache/legorl/pypi-bugs without a run.",
    )


class PypiBugsTasks:
    """The shipped bugs as Harbor tasks (mirrors and tasks written to the cache on the first ``tasks()``)."""

    def __init__(self, options: PypiBugsOptions, source: Path, root: Path):
        self.options = options
        self.source = source
        self.root = root

    def preflight(self) -> list[Problem]:
        if not self.source.is_dir():
            return [Problem(f"pypi-bugs directory {self.source} does not exist",
                            "set tasks.options.bugs to a directory of bugs, e.g. the shipped tasks/pypi-bugs")]  # fmt: skip
        if shutil.which("git") is None:
            return [Problem("git is not on PATH (the pypi-bugs source builds each bug's repository with it)",
                            "install git, e.g. apt-get install git")]  # fmt: skip
        return []

    def tasks(self) -> list[Task]:
        bugs = [read_bug(d) for d in bug_dirs(self.source) if self._selected(d.name)]
        if not bugs:
            raise InstanceError(
                f"no bug under {self.source} matches include={self.options.include} exclude={self.options.exclude}"
            )
        return [load_task(d) for d in ensure_tasks(self.root, bugs, self.options)]

    def _selected(self, name: str) -> bool:
        o = self.options
        if o.include and not any(fnmatch.fnmatchcase(name, p) for p in o.include):
            return False
        return not any(fnmatch.fnmatchcase(name, p) for p in o.exclude)


def ensure_tasks(root: Path, bugs: list[ShippedBug], options: PypiBugsOptions) -> list[Path]:
    """The task directories of these bugs and options under ``root``, written if not there yet;
    each bug's mirror is kept beside them (``mirrors/<id>.git``)."""

    def write(scratch: Path) -> dict[str, object]:
        mirrors = scratch / "mirrors"
        mirrors.mkdir()
        for bug in bugs:
            base = build_mirror(bug, mirrors / f"{bug.id}.git")
            write_task(
                instance_of(bug, base), scratch / bug.id, mirror=mirrors / f"{bug.id}.git",
                test_cmd=bug.bug.test_cmd, log_parser="parse_log_pytest", image_template=options.image,
                agent_timeout_sec=options.agent_timeout_sec, verifier_timeout_sec=options.verifier_timeout_sec,
                metadata=_metadata(bug),
            )  # fmt: skip
            for script in (scratch / bug.id).glob("*/*.sh"):
                script.chmod(0o755)
        return {"tasks": [b.id for b in bugs]}

    return cached_task_set(root / cache_key(bugs, options), write)


def cache_key(bugs: list[ShippedBug], options: PypiBugsOptions) -> str:
    """Same bug files and options -> same cache directory."""
    digest = hashlib.sha256()
    digest.update(json.dumps({"format": FORMAT_VERSION, "options": options.model_dump(
        exclude={"bugs", "dir", "include", "exclude"})}, sort_keys=True).encode())  # fmt: skip
    for bug in bugs:
        for file in sorted(p for p in bug.path.rglob("*") if p.is_file()):
            digest.update(f"{file.relative_to(bug.path.parent)}\0{os.stat(file).st_mode & 0o111}\0".encode())
            digest.update(file.read_bytes())
    return f"set-{digest.hexdigest()[:16]}"


def _metadata(bug: ShippedBug) -> dict[str, Any]:
    b = bug.bug
    return {
        "source": "pypi-bugs", "project": b.project, "homepage": b.homepage, "buggy_version": b.buggy_version,
        "fixed_version": b.fixed_version, "license": b.license, "upstream_record": b.upstream_record,
        "tests_written_by": b.tests_written_by,
    }  # fmt: skip


def _git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, input=stdin, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise InstanceError(f"git {' '.join(args[:2])} in {cwd} failed: {done.stderr.strip()[-500:]}")
    return done.stdout.strip()


def build(options: PypiBugsOptions, ctx: BuildContext) -> PypiBugsTasks:
    """Real bugs of PyPI projects (fixed between two releases) as SWE-bench tasks with git history."""
    return PypiBugsTasks(options, ctx.path(options.bugs), cache_root(options.dir, ctx, "pypi-bugs"))


@hookimpl
def legorl_register_tasks(register: Any) -> None:
    register("pypi-bugs", build, options=PypiBugsOptions)
