"""The crossing policy: what of the agent's change reaches verification, and why the rest does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from lego_rl.crossing import CrossingLimit, CrossingPolicy, FileChange
from lego_rl.kinds import Task

ROOTS = ("/app", "/opt/data")


def task(crossing: dict | None = None) -> Task:
    config = {"metadata": {"crossing": crossing}} if crossing is not None else {}
    return Task(name="t", path=Path("/nowhere"), instruction="", config=config)


PACKAGES = {"/app/pkg"}
"""The directories with an __init__.py at the start in these tests."""


def rule(
    path: str, kind: str = "modified", type_: str = "file", policy: CrossingPolicy | None = None,
    packages: set[str] | None = PACKAGES,
) -> str:  # fmt: skip
    policy = policy or CrossingPolicy.for_task(task(), ROOTS)
    return policy.rule(FileChange(path, kind, type_), None if packages is None else packages.__contains__)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "path", ["/app/calc.py", "/app/pkg/mod.py", "/opt/data/table.csv", "/app/README.md", "/app/src/lib.rs"]
)
def test_source_edits_cross(path: str) -> None:
    assert rule(path) == ""
    assert rule(path, kind="added") == ""
    assert rule(path, kind="deleted", type_="none") == ""


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/etc/profile", "outside the task's files"),
        ("/home/agent/.bashrc", "outside the task's files"),
        ("/tests/test_calc.py", "outside the task's files"),
        ("/app/.git/config", "git metadata"),
        ("/app/.git/hooks/post-checkout", "git metadata"),
        ("/app/.gitattributes", "git metadata"),
        ("/app/test_calc.py", "a test file"),
        ("/app/tests/helpers.py", "a test file"),
        ("/app/pkg/calc_test.py", "a test file"),
        ("/app/conftest.py", "test-runner configuration or site customisation"),
        ("/app/sub/conftest.py", "test-runner configuration or site customisation"),
        ("/app/pytest.ini", "test-runner configuration or site customisation"),
        ("/app/pyproject.toml", "test-runner configuration or site customisation"),
        ("/app/setup.cfg", "test-runner configuration or site customisation"),
        ("/app/sitecustomize.py", "test-runner configuration or site customisation"),
        ("/app/evil.pth", "test-runner configuration or site customisation"),
        ("/app/__pycache__/calc.cpython-312.pyc", "test-runner configuration or site customisation"),
        # a configuration file that no list names: not a source file, so it does not cross
        ("/app/pytest.toml", "test-runner configuration or site customisation"),
        ("/app/.pytest-future.cfg", "not a source file (by extension)"),
        ("/app/Makefile", "not a source file (by extension)"),
        ("/app/run", "not a source file (by extension)"),
    ],
)
def test_what_never_crosses_by_default(path: str, why: str) -> None:
    assert rule(path) == why
    assert rule(path, kind="added") == why


@pytest.mark.parametrize("module", ["unittest", "json", "pytest", "_pytest", "pluggy", "os"])
def test_an_added_top_level_module_that_shadows_does_not_cross(module: str) -> None:
    assert rule(f"/app/{module}.py", kind="added") == f"shadows the module {module!r}"
    assert rule(f"/app/{module}/__init__.py", kind="added") == f"shadows the module {module!r}"
    assert rule(f"/app/pkg/{module}.py", kind="added") == ""  # inside a package: pkg.json, no shadow
    assert rule(f"/app/{module}.py", kind="modified") == ""  # the image's own module
    # a directory that is no package may be on sys.path (PYTHONPATH=src, pytest's rootdir insertion)
    assert rule(f"/app/src/{module}.py", kind="added") == f"shadows the module {module!r}"
    assert rule(f"/app/src/{module}/__init__.py", kind="added") == f"shadows the module {module!r}"
    assert rule(f"/app/pkg/new/{module}.py", kind="added") == f"shadows the module {module!r}"  # a new directory
    # without knowing the starting state's packages, every directory may be on sys.path
    assert rule(f"/app/pkg/{module}.py", kind="added", packages=None) == f"shadows the module {module!r}"


def test_links_and_special_files_never_cross() -> None:
    assert rule("/app/calc.py", type_="symlink") == "a symlink"
    assert rule("/app/pipe.py", kind="added", type_="other") == "not a regular file"
    allowing = CrossingPolicy.for_task(task({"allow": ["/app/link.py"]}), ROOTS)
    assert rule("/app/link.py", type_="symlink", policy=allowing) == ""
    assert rule("/app/pipe.py", type_="other", policy=allowing) == "not a regular file"


def test_a_task_widens_and_narrows_the_rules() -> None:
    policy = CrossingPolicy.for_task(
        task({"allow": ["setup.cfg", "/app/tests/*"], "deny": ["*.md"], "extensions": ["ini"]}), ROOTS
    )
    assert rule("/app/setup.cfg", policy=policy) == ""
    assert rule("/app/tests/helpers.py", policy=policy) == ""
    assert rule("/app/README.md", policy=policy) == "denied by the task"
    assert rule("/app/settings.ini", policy=policy) == ""
    assert rule("/app/.git/config", policy=policy) == "git metadata"


@pytest.mark.parametrize(
    "table",
    [{"allow": "x"}, {"allow": [1]}, {"allowed": []}, "no"],
    ids=["string", "number", "unknown-key", "not-a-table"],
)
def test_a_bad_crossing_table_is_an_error_naming_it(table) -> None:
    with pytest.raises(ValueError, match=r"\[metadata.crossing\]"):
        CrossingPolicy.for_task(task(table), ROOTS)


def test_decide_splits_and_records_why() -> None:
    policy = CrossingPolicy.for_task(task(), ROOTS)
    changes = [
        FileChange("/app/calc.py", "modified", "file", 40),
        FileChange("/app/conftest.py", "added", "file", 10),
        FileChange("/app/old.py", "deleted", "none"),
    ]
    crossing = policy.decide(changes)
    assert [c.path for c in crossing.crossed] == ["/app/calc.py", "/app/old.py"]
    assert crossing.summary()["dropped_paths"] == [
        "A /app/conftest.py: test-runner configuration or site customisation"
    ]


def test_past_the_budget_is_a_crossing_limit() -> None:
    policy = CrossingPolicy.for_task(task({"max_files": 3, "max_bytes": 100}), ROOTS)
    many = [FileChange(f"/app/m{i}.py", "added", "file", 1) for i in range(4)]
    with pytest.raises(CrossingLimit, match="4 files"):
        policy.decide(many)
    with pytest.raises(CrossingLimit, match="101 bytes"):
        policy.decide([FileChange("/app/big.py", "added", "file", 101)])
    dropped = [FileChange(f"/app/test_{i}.py", "added", "file", 1) for i in range(10)]
    assert len(policy.decide(dropped).dropped) == 10  # what does not cross costs no budget
