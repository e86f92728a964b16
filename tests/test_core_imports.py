"""The core imports no plugin: what plugins provide (dialects, tokenizers, red-team attacks,
benchmarks, commands) it reaches through the registry, so it installs and runs without any.
And no product module imports the test doubles (:mod:`lego_rl.testing.scripted_inference`):
only tests and the kit's own contracts (``lego_rl/testing/``) may.

Read from the source with :mod:`ast` (docstrings and comments may name modules): an
``import``/``from`` of a module, or ``importlib.import_module`` / ``__import__`` of one by a
literal name.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "lego_rl"
DOUBLES = "lego_rl.testing.scripted_inference"


def imports(tree: ast.AST, *, members: bool = False) -> list[tuple[int, str]]:
    """(line, module) of each import in ``tree``; with ``members``, ``from a import b`` also
    gives ``a.b`` (``b`` may be a module)."""
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if members:
                names += [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call) and node.args:
            func, first = node.func, node.args[0]
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(first, ast.Constant):
                names = [str(first.value)]
        line = getattr(node, "lineno", 0)
        found += [(line, n) for n in names]
    return found


def plugin_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of each import of a ``legorl_*`` module in ``tree``."""
    return [(line, n) for line, n in imports(tree) if n.split(".")[0].startswith("legorl_")]


def double_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of each import of the test doubles in ``tree``."""
    return [(line, n) for line, n in imports(tree, members=True) if n == DOUBLES or n.startswith(DOUBLES + ".")]


def product_modules() -> list[Path]:
    """The core outside ``lego_rl/testing/`` and the packages of every plugin distribution
    (``plugins/*/<package>/``, ``contrib/*/<package>/``; their tests are not product)."""
    core = [p for p in CORE.rglob("*.py") if "testing" not in p.relative_to(CORE).parts]
    packages = [init.parent for init in (*ROOT.glob("plugins/*/*/__init__.py"), *ROOT.glob("contrib/*/*/__init__.py"))]
    return sorted(core + [p for package in packages if package.name != "tests" for p in package.rglob("*.py")])


def test_no_core_module_imports_a_plugin():
    offenders = [
        f"{path.relative_to(CORE.parent)}:{line}: {module}"
        for path in sorted(CORE.rglob("*.py"))
        for line, module in plugin_imports(ast.parse(path.read_text(), str(path)))
    ]
    assert not offenders, "the core imports plugins:\n" + "\n".join(offenders)


def test_no_product_module_imports_the_test_doubles():
    modules = product_modules()
    assert any(p.parts[-2:] == ("engine", "task_check.py") for p in modules)
    assert any("legorl_std" in p.parts for p in modules)
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in modules
        for line, module in double_imports(ast.parse(path.read_text(), str(path)))
    ]
    assert not offenders, "product modules import the test doubles:\n" + "\n".join(offenders)


def test_the_check_sees_every_form_of_import():
    source = (
        "import legorl_std\nfrom legorl_embedded.policy.tokenizer import load_tokenizer\n"
        "import importlib\nimportlib.import_module('legorl_std.redteam')\n__import__('legorl_x')\n"
        "from lego_rl import hookimpl\nimport json\n"
    )
    assert [m for _, m in plugin_imports(ast.parse(source))] == [
        "legorl_std", "legorl_embedded.policy.tokenizer", "legorl_std.redteam", "legorl_x",
    ]  # fmt: skip


def test_the_check_sees_the_doubles_in_every_form():
    source = (
        "from lego_rl.testing import scripted_inference\n"
        "from lego_rl.testing.scripted_inference import scripted_proxy\n"
        "import lego_rl.testing.scripted_inference as s\n"
        "from lego_rl.testing import runs\nfrom lego_rl.tiny_tokenizer import tiny_chat_tokenizer\n"
    )
    assert sorted({line for line, _ in double_imports(ast.parse(source))}) == [1, 2, 3]
