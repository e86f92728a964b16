"""The GPU stack's lock files: written from pip's resolver, and proved by it.

Two environments, because their pins cannot share one (README, "GPU stack"):

- ``train``: verl 0.9.1 with the vLLM its rollout workers import in-process (verl's own
  ``vllm`` extra: vLLM 0.24.0, torch 2.11.0, transformers 5.9.0), megatron-core + mbridge,
  the FSDP pieces, ray, and lego-rl with its plugins from this checkout (verl's agent loops run
  the trials there too);
- ``vllm``: ``vllm serve`` 0.33 for inference ``vllm`` under lego-rl's own trainers (torch
  2.14, transformers >= 5.16.1, past the < 5.11 of verl and legorl-embedded); legorl-vllm talks
  to it over HTTP from the lego-rl environment, so nothing of ours goes there.

The resolver runs in a throwaway CPython 3.12 venv against PyPI only: this machine's pip
configuration (config files, ``PIP_*`` variables: local indexes, find-links, a torch cap) is
left out, so what is written and proved is what any Linux x86_64 machine gets from PyPI.

    python gpu/lock.py [train|vllm ...]     rewrite the lock(s) from requirements-*.in
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

GPU_DIR = Path(__file__).resolve().parent
ROOT = GPU_DIR.parent
INDEX = "https://pypi.org/simple/"
PIP = "26.3"
"""The pip whose resolver writes and proves the locks (a venv's bundled pip may be older)."""
KEEP_ENV = ("PIP_CERT", "PIP_CLIENT_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES", "PIP_PROXY")
"""The only PIP_* variables the resolver sees: how to reach PyPI, never what to pick."""


@dataclass(frozen=True)
class Environment:
    name: str
    title: str
    local: tuple[str, ...] = ()
    """Distributions of this checkout installed into it (paths from the repository root)."""
    post_install: tuple[str, ...] = ()
    """Steps the resolver proof leaves out (CUDA builds), as commands for the venv's pip."""

    @property
    def lock(self) -> Path:
        return GPU_DIR / f"requirements-{self.name}.txt"

    @property
    def source(self) -> Path:
        return GPU_DIR / f"requirements-{self.name}.in"

    def install(self, pip: str = "pip") -> str:
        """The install line, run from the repository root."""
        return " ".join([pip, "install", "-r", f"gpu/{self.lock.name}", *(f"-e {p}" for p in self.local)])


TRAIN = Environment(
    "train",
    "verl 0.9.1 + its vLLM rollout + Megatron/FSDP engine + ray, and lego-rl with its plugins",
    local=(
        ".",
        "plugins/legorl-std",
        "plugins/legorl-embedded",
        "plugins/legorl-verl",
        "plugins/legorl-vllm",
        "plugins/legorl-claude-code",
        "plugins/legorl-codex",
        "plugins/legorl-openhands",
        "plugins/legorl-mini-swe-agent",
        "plugins/legorl-swe-bench",
    ),
    post_install=(
        "install --no-build-isolation flash-attn==2.8.3  # strategy fsdp: verl's default attention",
        "install --no-build-isolation 'transformer-engine[core_cu13,pytorch]'  # strategy megatron",
    ),
)
"""legorl-harbor is not in it: harbor 0.26 needs fastapi >= 0.162, vLLM 0.24 < 0.137."""
VLLM = Environment("vllm", "vLLM 0.33 for `vllm serve` (inference vllm under lego-rl's own trainers)")
ENVIRONMENTS = {e.name: e for e in (TRAIN, VLLM)}

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lock: Path) -> dict[str, str]:
    """Name -> version of every ``name==version`` line of a lock file."""
    found = {}
    for line in lock.read_text().splitlines():
        if (m := _PIN.match(line.strip())) is not None:
            found[canonical(m[1])] = m[2]
    return found


def options(path: Path) -> list[str]:
    """The pip option lines of a requirements file (``--only-binary :all:``, ...)."""
    return [line.strip() for line in path.read_text().splitlines() if line.startswith("--")]


def resolver_env() -> dict[str, str]:
    """The environment of a resolver run: no pip config file, no PIP_* choice of this machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in KEEP_ENV}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def make_venv(path: Path, python: str = sys.executable) -> Path:
    """A throwaway venv of ``python`` (CPython 3.12) with pip ``PIP``; returns its python."""
    subprocess.run([python, "-m", "venv", str(path)], check=True)
    venv_python = path / "bin" / "python"
    pip = [str(venv_python), "-m", "pip", "install", "-q", "--index-url", INDEX, f"pip=={PIP}"]
    subprocess.run(pip, check=True, env=resolver_env())
    return venv_python


def resolve(python: Path, requirements: Path, env: Environment, report: Path) -> subprocess.CompletedProcess:
    """``pip install --dry-run --report`` of ``requirements`` plus ``env``'s local distributions
    (editable, as the install line has them)."""
    command = [
        str(python), "-m", "pip", "install", "--dry-run", "--ignore-installed", "--index-url", INDEX,
        "--report", str(report), "-r", str(requirements),
        *(arg for path in env.local for arg in ("-e", str(ROOT / path))),
    ]  # fmt: skip
    return subprocess.run(command, cwd=ROOT, env=resolver_env(), capture_output=True, text=True)


def installs(report: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(name -> version from an index, name -> URL of what came from elsewhere) of a report."""
    indexed, other = {}, {}
    for item in json.loads(report.read_text())["install"]:
        name, version = canonical(item["metadata"]["name"]), item["metadata"]["version"]
        url = item["download_info"]["url"]
        if item["is_direct"]:
            other[name] = url
        else:
            indexed[name] = version
    return indexed, other


def header(env: Environment) -> list[str]:
    """A lock's opening: what it is, how it was written, the install line, then pip's options."""
    pip = f".venv-{env.name}/bin/pip"
    return [
        f"# lego-rl's GPU stack, environment `{env.name}`: {env.title}.",
        f"# Written by `python gpu/lock.py {env.name}` from {env.source.name} with pip {PIP}'s resolver",
        "# against PyPI alone (Linux x86_64, CPython 3.12); `python gpu/lock.py --check` proves it resolves.",
        "# Do not edit: change the .in file and rewrite.",
        "#",
        "# Install, from the repository root, in a fresh Python 3.12 venv on the GPU machine:",
        f"#   python3.12 -m venv .venv-{env.name}",
        f"#   {env.install(pip)}",
        *(["# Then, on a machine with the CUDA toolkit (source builds, outside the proof):"]
          if env.post_install else []),
        *(f"#   {pip} {step}" for step in env.post_install),
        *options(env.source),
    ]  # fmt: skip


def write(env: Environment, python: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        done = resolve(python, env.source, env, report)
        if done.returncode != 0:
            sys.exit(f"{env.source.name} does not resolve:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        indexed, _ = installs(report)
    lines = [*header(env), *(f"{name}=={version}" for name, version in sorted(indexed.items()))]
    env.lock.write_text("\n".join(lines) + "\n")
    print(f"{env.lock.relative_to(ROOT)}: {len(indexed)} pins")


def unmet(report: dict) -> list[str]:
    """Every unconditional dependency of every package a report installs, not met by it."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    env = {**default_environment(), **report["environment"], "extra": ""}
    versions = {canonical(i["metadata"]["name"]): i["metadata"]["version"] for i in report["install"]}
    found = []
    for item in report["install"]:
        for text in item["metadata"].get("requires_dist", []):
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            have = versions.get(canonical(req.name))
            if have is None or not req.specifier.contains(have, prereleases=True):
                found.append(f"{item['metadata']['name']} needs {req}, gets {have}")
    return found


def check(env: Environment, python: Path) -> list[str]:
    """What is wrong with ``env``'s lock as pip's resolver sees it on PyPI: it must install
    exactly its pins (nothing added, moved or left out) plus this checkout's distributions,
    every dependency met, wheels from PyPI for Linux x86_64 / CPython 3.12, CUDA builds included."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.json"
        done = resolve(python, env.lock, env, path)
        if done.returncode != 0:
            return [f"{env.lock.name} does not resolve:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"]
        report = json.loads(path.read_text())
        indexed, direct = installs(path)
    wanted, problems = pins(env.lock), []
    for name in sorted(set(wanted) | set(indexed)):
        if wanted.get(name) != indexed.get(name):
            problems.append(f"{name}: pinned {wanted.get(name)}, pip installs {indexed.get(name)}")
    local = {"lego-rl" if p == "." else Path(p).name for p in env.local}
    if set(direct) != local:
        problems.append(f"local distributions {sorted(direct)}, expected {sorted(local)}")
    problems += unmet(report)
    where = (report["environment"]["python_version"], report["environment"]["platform_machine"])
    if where != ("3.12", "x86_64"):
        problems.append(f"resolved for {where}, not CPython 3.12 on x86_64")
    no_binary = {line.split()[1] for line in options(env.lock) if line.startswith("--no-binary")}
    for item in report["install"]:
        url = item["download_info"]["url"]
        if item["is_direct"]:
            continue
        if not url.startswith("https://files.pythonhosted.org/"):
            problems.append(f"{item['metadata']['name']} from {url}, not PyPI")
        elif not url.endswith(".whl") and canonical(item["metadata"]["name"]) not in no_binary:
            problems.append(f"{item['metadata']['name']}: an sdist ({url})")
    if not any(name.startswith("nvidia-nccl") for name in indexed):
        problems.append("no CUDA build of torch (no nvidia-nccl)")
    return problems


def main(args: list[str]) -> None:
    """``python gpu/lock.py [train|vllm ...]`` rewrites the locks; ``--check`` proves instead
    that each resolves to exactly itself on PyPI (minutes: wheels are fetched for metadata)."""
    checking = "--check" in args
    names = [a for a in args if a != "--check"] or list(ENVIRONMENTS)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        python = make_venv(Path(tmp) / "venv")
        for name in names:
            if not checking:
                write(ENVIRONMENTS[name], python)
                continue
            problems = check(ENVIRONMENTS[name], python)
            failed |= bool(problems)
            print(f"{ENVIRONMENTS[name].lock.relative_to(ROOT)}: " + ("; ".join(problems) or "resolves to its pins"))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
