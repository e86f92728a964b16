"""The core and the first-party plugins pass ruff with the repository's configuration
(pyproject.toml [tool.ruff]): pyflakes, pycodestyle errors, import order, bugbear, pyupgrade."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ruff", reason="ruff comes with lego-rl's test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_is_clean_on_the_core_and_the_plugins() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "lego_rl", "plugins"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
