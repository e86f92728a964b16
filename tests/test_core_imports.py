"""The core imports no plugin: what plugins provide (dialects, tokenizers, red-team attacks,
benchmarks, commands) it reaches through the registry, so it installs and runs without any.

Read from the source with :mod:`ast` (docstrings and comments may name plugins): an
``import``/``from`` of a ``legorl_*`` module, or ``importlib.import_module`` /
``__import__`` of one by a literal name, anywhere in ``lego_rl/``, fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "lego_rl"


def plugin_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of each import of a ``legorl_*`` module in ``tree``."""
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and node.args:
            func, first = node.func, node.args[0]
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(first, ast.Constant):
                names = [str(first.value)]
        line = getattr(node, "lineno", 0)
        found += [(line, n) for n in names if n.split(".")[0].startswith("legorl_")]
    return found


def test_no_core_module_imports_a_plugin():
    offenders = [
        f"{path.relative_to(CORE.parent)}:{line}: {module}"
        for path in sorted(CORE.rglob("*.py"))
        for line, module in plugin_imports(ast.parse(path.read_text(), str(path)))
    ]
    assert not offenders, "the core imports plugins:\n" + "\n".join(offenders)


def test_the_check_sees_every_form_of_import():
    source = (
        "import legorl_std\nfrom legorl_embedded.policy.tokenizer import load_tokenizer\n"
        "import importlib\nimportlib.import_module('legorl_std.redteam')\n__import__('legorl_x')\n"
        "from lego_rl import hookimpl\nimport json\n"
    )
    assert [m for _, m in plugin_imports(ast.parse(source))] == [
        "legorl_std", "legorl_embedded.policy.tokenizer", "legorl_std.redteam", "legorl_x",
    ]  # fmt: skip
