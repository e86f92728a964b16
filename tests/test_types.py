"""The core and the first-party plugins pass mypy with the repository's configuration
(pyproject.toml [tool.mypy]: check_untyped_defs, no implicit Optional, no unused ignores)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy comes with lego-rl's test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # from a cold cache (a fresh clone): ~12 s here
def test_mypy_is_clean_on_the_core_and_the_plugins(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache"), "--no-error-summary"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
