"""The offline base image ``legorl/base:bookworm``: a Debian root file system from Debian's
packages (mmdebstrap), with bash, coreutils, python3 (with pytest: the pypi-bugs tasks' tests) and
git, imported into the daemon.

No registry is reachable, so the task images' ``FROM`` is this image (the sandbox's
``fallback_base``) wherever the named one is not in the daemon. The build is cached by its
inputs (suite, variant, packages, the apt sources it reads, this recipe's version): the root
file system tarball under ``<cache>/base-<key>.tar`` (built once, ~2 min), the image labelled
``legorl.base.key=<key>`` (imported from the tarball in seconds when the daemon lost it).

``python -m legorl_docker.base [--host URL] [--cache DIR]`` builds or checks it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from legorl_docker.cli import Docker, DockerError
from legorl_docker.daemon import locked

TAG = "legorl/base:bookworm"
RECIPE = 1
"""Bump when the recipe below changes in a way its fields do not show."""
PACKAGES = ("bash", "coreutils", "python3", "python3-pytest", "git", "ca-certificates", "procps", "util-linux", "patch", "less")
SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
DEFAULT_CACHE = Path(os.environ.get("LEGORL_DOCKER_STATE", "/var/lib/legorl-docker")) / "cache"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class BaseImageError(RuntimeError):
    """The base image could not be built; the message says why and how to retry."""


@dataclass(frozen=True)
class Recipe:
    """Everything the base image is made of (its cache key)."""

    suite: str = "bookworm"
    variant: str = "minbase"
    packages: tuple[str, ...] = PACKAGES
    sources: str = field(default_factory=lambda: SOURCES.read_text() if SOURCES.is_file() else "")
    """The host's apt sources (deb822), so the image has the host's Debian; '' for the default mirror."""
    recipe: int = RECIPE

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Built:
    tag: str
    key: str
    how: str
    """present (nothing to do), imported (from the cached tarball) or built (mmdebstrap + import)."""
    seconds: float


def ensure(docker: Docker, cache: Path = DEFAULT_CACHE, recipe: Recipe | None = None, tag: str = TAG) -> Built:
    """Make ``tag`` the image of ``recipe`` in the daemon, building only what is missing."""
    recipe = recipe or Recipe()
    start = time.monotonic()
    if _label(docker, tag) == recipe.key:
        return Built(tag, recipe.key, "present", time.monotonic() - start)
    cache.mkdir(parents=True, exist_ok=True)
    with locked(cache / "base.lock"):
        if _label(docker, tag) == recipe.key:  # another process made it meanwhile
            return Built(tag, recipe.key, "present", time.monotonic() - start)
        tarball = cache / f"base-{recipe.key}.tar"
        how = "imported"
        if not tarball.is_file():
            _debootstrap(recipe, tarball)
            how = "built"
        docker.run(
            "import", "--change", f"ENV PATH={PATH}", "--change", "ENV LANG=C.UTF-8",
            "--change", f"LABEL legorl.base.key={recipe.key}", "--change", 'CMD ["bash"]',
            str(tarball), tag, timeout=600,
        )  # fmt: skip
    return Built(tag, recipe.key, how, time.monotonic() - start)


def _debootstrap(recipe: Recipe, tarball: Path) -> None:
    if shutil.which("mmdebstrap") is None:
        raise BaseImageError("mmdebstrap is missing: apt-get install mmdebstrap (scripts/setup.sh does, as root)")
    partial = tarball.with_suffix(".partial.tar")
    argv = [
        "mmdebstrap", "--quiet", f"--variant={recipe.variant}", f"--include={','.join(recipe.packages)}",
        "--aptopt=Acquire::Languages \"none\"", "--dpkgopt=path-exclude=/usr/share/man/*",
        "--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        "--dpkgopt=path-exclude=/usr/share/locale/*", recipe.suite, str(partial),
    ]  # fmt: skip
    sources: Path | None = None
    if recipe.sources:
        sources = tarball.with_suffix(".sources")
        sources.write_text(recipe.sources)
        argv.append(str(sources))
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).splitlines()[-20:])
            raise BaseImageError(f"mmdebstrap failed (exit {done.returncode}); its output ends:\n{tail}")
        partial.rename(tarball)
    finally:
        partial.unlink(missing_ok=True)
        if sources is not None:
            sources.unlink(missing_ok=True)


def _label(docker: Docker, tag: str) -> str:
    done = docker.run("image", "inspect", "--format", '{{index .Config.Labels "legorl.base.key"}}', tag, check=False, timeout=60)
    return done.stdout.decode().strip() if done.returncode == 0 else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m legorl_docker.base", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", help="the daemon (a DOCKER_HOST URL; default: $DOCKER_HOST)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"tarball cache (default {DEFAULT_CACHE})")
    args = parser.parse_args(argv)
    try:
        built = ensure(Docker(args.host), args.cache)
    except (BaseImageError, DockerError) as exc:
        print(f"base image: {exc}", file=sys.stderr)
        return 1
    print(f"{built.tag} ({built.key}): {built.how} in {built.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
