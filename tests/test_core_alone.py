"""The core installs and runs alone: no core module imports a first-party plugin (issue 28).

tests/test_core_imports.py reads the source; this module runs it, in a fresh venv made from
the running interpreter's base (``sys._base_executable``) that holds the core and its
third-party dependencies but no plugin. Nothing is downloaded:

- Every entry of this environment's site-packages is symlinked into the new venv's, except
  the files (as RECORD lists them: dist-info, editable ``.pth`` and finder, import packages) of
  each plugin distribution, one with an entry point in group ``lego_rl``, and of the core's
  own. Symlinks, not a ``.pth`` naming this site-packages: a directory on ``sys.path`` shows
  every distribution in it, plugins included, to importlib.metadata; linked entries are the
  venv's own, and the ``.pth`` files among them (setuptools') run as after an install.
- The core is installed from this checkout the ordinary way, ``pip install --no-deps
  --no-build-isolation --no-index -e REPO``, with the linked pip and setuptools: its
  dist-info, ``legorl`` script and entry points (the ``pytest11`` kit) are a user's install's.

The isolation is checked before anything else (no distribution with ``lego_rl`` entry points,
no plugin import package findable, the core is this checkout's editable install). Then, with
that venv's python: every ``lego_rl`` module is imported, under a finder that records any
attempt to import a ``legorl_*`` module, guarded ones too (a plugin_template file with
``{{placeholders}}`` that does not compile is a template, not Python: it is skipped and named);
``legorl --help``; ``legorl plugins`` lists none; ``legorl validate`` of the quickstart names
the plugins it lacks and how to install them, without a traceback; the core's own test
modules pass.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
GROUP = "lego_rl"

CORE_TESTS = [
    "tests/test_spec.py", "tests/test_registry.py", "tests/test_schema.py", "tests/test_cli.py",
    "tests/test_console.py", "tests/test_crossing.py", "tests/test_terminations.py",
    "tests/test_token_ids.py", "tests/test_proxy_render.py", "tests/test_proxy_toolcalls.py",
    "tests/test_proxy_budgets.py", "tests/test_proxy_recorder.py",
]  # fmt: skip
"""Test modules that import no plugin and need none. The others import ``legorl_*`` (among
them test_contracts_kit, whose self-tests build legorl-std's dialect and sandbox), drive
shipped specs or first-party plugins end to end, or check documents, not the core."""

NEEDS_PLUGINS = {
    "tests/test_registry.py::test_first_party_benchmarks_and_the_redteam_command_come_through_the_registry":
        "asserts legorl-std's benchmarks and redteam command",
    "tests/test_schema.py::test_committed_schema_is_fresh":
        "the committed schema holds every first-party plugin's options",
    "tests/test_console.py::test_plan_to_a_pipe_keeps_a_long_spec_path_on_its_line":
        "runs `legorl plan` on a shipped spec (its plugins)",
    "tests/test_console.py::test_apply_to_a_pipe_keeps_step_and_path_lines_whole":
        "runs `legorl apply` on a shipped spec (its plugins)",
}  # fmt: skip
"""Tests of CORE_TESTS that check first-party plugins by purpose: deselected, with why."""

RECORDER = """
import importlib.abc, json, sys
attempted = []
class Recorder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0].startswith("legorl_"):
            attempted.append(name)
sys.meta_path.insert(0, Recorder())
"""
"""A finder that records each attempt to import a ``legorl_*`` module and finds nothing."""

IMPORT_EVERY_MODULE = """
import importlib, os, pathlib, traceback
import lego_rl
root = pathlib.Path(lego_rl.__file__).parent
imported, templates, failed = [], [], {}
for folder, dirs, files in os.walk(root, followlinks=True):  # plugin_template is a symlink
    dirs[:] = sorted(d for d in dirs if d != "__pycache__")
    for file in sorted(f for f in files if f.endswith(".py")):
        path = pathlib.Path(folder, file)
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        source = path.read_text()
        try:
            compile(source, str(path), "exec")
        except SyntaxError:
            if "plugin_template" in parts and "{{" in source:
                templates.append(name)
                continue
        try:
            importlib.import_module(name)
            imported.append(name)
        except BaseException:
            failed[name] = traceback.format_exc(limit=-3)
print(json.dumps({"imported": imported, "templates": templates, "failed": failed,
                  "attempted": attempted}))
"""

ISOLATION = """
import importlib.metadata as md, importlib.util, json, sys
import lego_rl
core = [d for d in md.distributions() if d.name == "lego-rl"]
print(json.dumps({
    "plugins": sorted(d.name for d in md.distributions() if any(e.group == "lego_rl" for e in d.entry_points)),
    "findable": sorted(m for m in sys.argv[1:] if importlib.util.find_spec(m)),
    "core_file": lego_rl.__file__,
    "core_dists": len(core),
    "core_url": json.loads(core[0].read_text("direct_url.json") or "{}").get("url") if core else None,
}))
"""


def hidden(site: Path) -> tuple[set[str], set[str]]:
    """Entries of ``site`` that belong to a plugin or the core; the plugins' import packages."""
    entries: set[str] = set()
    modules: set[str] = set()
    for dist in importlib.metadata.distributions(path=[str(site)]):
        plugin_eps = [ep for ep in dist.entry_points if ep.group == GROUP]
        is_core = re.sub(r"[-_.]+", "-", dist.name).lower() == "lego-rl"
        if not (plugin_eps or is_core):
            continue
        modules |= set() if is_core else {ep.module.split(".")[0] for ep in plugin_eps}
        entries |= {f.parts[0] for f in dist.files or [] if f.parts[0] not in ("..", "__pycache__")}
        entries |= set((dist.read_text("top_level.txt") or "").split())
    return entries, modules


def child_env(scripts: Path) -> dict[str, str]:
    """This environment less what would leak into the venv (PYTHONPATH, LEGORL_*, pip config)."""
    keep = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "LEGORL_", "PIP_", "PYTEST_")) and k != "VIRTUAL_ENV"
    }  # fmt: skip
    return keep | {
        "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1",
        "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }  # fmt: skip


class Venv:
    def __init__(self, root: Path) -> None:
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", "--without-pip", str(root)], check=True)
        self.root, python = root, root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
        where = "import json, sysconfig; print(json.dumps(sysconfig.get_paths()))"
        paths = json.loads(subprocess.run([python, "-c", where], check=True, capture_output=True, text=True).stdout)
        self.python, self.site, self.scripts = python, Path(paths["purelib"]), Path(paths["scripts"])
        self.env = child_env(self.scripts)

    def run(self, *args: str, script: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``python ARGS`` (or the venv's ``script``), from outside the checkout unless ``cwd``:
        ``-c`` puts the working directory on sys.path, and the checkout's lego_rl.egg-info would
        be a second core distribution and its lego_rl/ found before the installed one."""
        cmd = [str(self.scripts / script)] if script else [str(self.python)]
        return subprocess.run([*cmd, *args], capture_output=True, text=True, env=self.env, cwd=cwd or self.root)

    def expose(self, site: Path) -> set[str]:
        """Link ``site``'s entries but the plugins' and the core's; the plugins' import packages."""
        entries, plugin_modules = hidden(site)
        for entry in sorted(site.iterdir()):
            target = self.site / entry.name
            if entry.name not in entries and entry.name != "__pycache__" and not target.exists():
                target.symlink_to(entry)
        return plugin_modules


def plugin_names(node: object) -> list[str]:
    """Every ``plugin:`` value of a spec."""
    if isinstance(node, dict):
        own = [str(node["plugin"])] if "plugin" in node else []
        return own + [n for value in node.values() for n in plugin_names(value)]
    return [n for item in node for n in plugin_names(item)] if isinstance(node, list) else []


def site_dirs() -> list[Path]:
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(Path(paths[k]).resolve() for k in ("purelib", "platlib")))


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    sites = site_dirs()
    installed = {d.name for site in sites for d in importlib.metadata.distributions(path=[str(site)])}
    if lacking := {"pip", "setuptools"} - installed:
        pytest.skip(f"{', '.join(sorted(lacking))} not installed here (pip install 'setuptools>=69' pip); "
                    "the core's editable install into the fresh venv needs them")  # fmt: skip
    env = Venv(tmp_path_factory.mktemp("core-alone") / "venv")
    modules = set().union(*(env.expose(site) for site in sites))
    pip = env.run("-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-e", str(REPO))
    assert pip.returncode == 0, f"installing the core alone failed:\n{pip.stdout}\n{pip.stderr}"
    proc = env.run("-c", ISOLATION, *sorted(modules))
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["plugins"] == [], f"plugin distributions leaked into the core-alone venv: {seen['plugins']}"
    assert seen["findable"] == [], f"plugin packages importable in the core-alone venv: {seen['findable']}"
    assert Path(seen["core_file"]) == REPO / "lego_rl" / "__init__.py"
    assert seen["core_dists"] == 1 and seen["core_url"] == REPO.as_uri(), seen
    return env


def test_the_deselected_tests_exist() -> None:
    for node in NEEDS_PLUGINS:
        path, name = node.split("::")
        assert path in CORE_TESTS, node
        tree = ast.parse((REPO / path).read_text())
        assert name in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}, node


@pytest.mark.slow
def test_the_core_runs_without_any_plugin(venv: Venv, tmp_path: Path) -> None:
    proc = venv.run("-c", RECORDER + IMPORT_EVERY_MODULE)
    assert proc.returncode == 0, proc.stderr
    walk = json.loads(proc.stdout.splitlines()[-1])
    assert not walk["failed"], "core modules fail to import without plugins:\n" + "\n".join(
        f"{name}:\n{trace}" for name, trace in walk["failed"].items()
    )
    assert not walk["attempted"], f"the core tries to import plugins: {walk['attempted']}"
    assert "lego_rl.cli.main" in walk["imported"] and "lego_rl.testing.plugin" in walk["imported"]
    assert all(".plugin_template." in name for name in walk["templates"]), walk["templates"]

    helped = venv.run("--help", script="legorl")
    assert helped.returncode == 0 and "validate" in helped.stdout, helped.stdout + helped.stderr
    assert "plugin commands not loaded" not in helped.stderr, helped.stderr
    listed = venv.run("plugins", "--json", script="legorl")
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stdout + listed.stderr

    spec = REPO / "specs" / "quickstart.yaml"
    names = set(plugin_names(yaml.safe_load(spec.read_text())))
    checked = venv.run("validate", str(spec), script="legorl")
    said = (checked.stdout + checked.stderr).replace(str(spec), "")
    # every plugin the quickstart names is first-party (lego_rl/catalog.json): validate accepts the
    # spec with a warning per plugin naming its distribution and how to install it; plan refuses
    assert "Traceback" not in said and "which is not installed (pip install" in said, said
    assert any(re.search(rf"\b{re.escape(n)}\b", said) for n in names), f"no missing plugin named:\n{said}"

    tests = venv.run(
        "-P", "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", f"--basetemp={tmp_path / 'inner'}",
        *CORE_TESTS, *(f"--deselect={node}" for node in NEEDS_PLUGINS), cwd=REPO,
    )  # fmt: skip
    report = tests.stdout + tests.stderr
    assert tests.returncode == 0, f"the core's tests fail without plugins:\n{report[-6000:]}"
    skips = [line for line in report.splitlines() if line.startswith("SKIPPED") and "legorl" in line]
    assert not skips, "core tests skipped for want of a plugin:\n" + "\n".join(skips)


@pytest.mark.slow
def test_the_venv_would_catch_a_core_module_importing_a_plugin(venv: Venv) -> None:
    if importlib.util.find_spec("legorl_std") is None:
        pytest.skip("legorl-std is not installed here: hiding it from the venv proves nothing")
    unguarded = venv.run("-c", "import legorl_std")
    assert unguarded.returncode != 0 and "No module named 'legorl_std'" in unguarded.stderr
    guarded = venv.run("-c", RECORDER + "try:\n import legorl_std\nexcept ImportError:\n pass\n"
                       "print(json.dumps(attempted))")  # fmt: skip
    assert guarded.returncode == 0 and json.loads(guarded.stdout) == ["legorl_std"], guarded.stderr
