"""A tiny Dockerfile interpreter for the local sandbox.

It materialises only what needs no image: ``FROM`` (recorded, never pulled), ``WORKDIR``,
``COPY``/``ADD`` of files from the build context, ``ENV`` and ``ARG``. Metadata
instructions (LABEL, CMD, EXPOSE, ...) are ignored; anything that would need a real build
(RUN, USER, ...) is an error that points to the ``harbor`` sandbox.
"""

from __future__ import annotations

import glob
import json
import os
import posixpath
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

IGNORED = frozenset({"LABEL", "EXPOSE", "CMD", "ENTRYPOINT", "STOPSIGNAL", "HEALTHCHECK", "MAINTAINER"})
_VAR = re.compile(r"\\\$|\$(?:\{(?P<name>\w+)(?::(?P<op>[-+])(?P<word>[^}]*))?\}|(?P<bare>\w+))")


class DockerfileError(ValueError):
    """The Dockerfile cannot be materialised locally; the message names file and line."""


@dataclass
class Image:
    """What the local sandbox takes from a Dockerfile."""

    base: str = ""
    workdir: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    mount_points: list[str] = field(default_factory=list)
    """Absolute paths inside the sandbox whose content lives under the materialised root."""


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


def parse(text: str) -> list[Instruction]:
    """Dockerfile text -> instructions (continuations joined, comments dropped)."""
    out: list[Instruction] = []
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not parts):
            continue
        if not parts:
            start = number
        if stripped.endswith("\\"):
            parts.append(stripped[:-1].strip())
            continue
        parts.append(stripped)
        joined = " ".join(p for p in parts if p)
        parts = []
        keyword, _, args = joined.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
    if parts:
        keyword, _, args = " ".join(parts).partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
    return out


def materialise(dockerfile: Path, root: Path, base_env: dict[str, str] | None = None) -> Image:
    """Apply ``dockerfile`` (build context: its directory) onto the empty directory ``root``.

    A path ``/x/y`` of the image is written to ``root/x/y``. ``base_env`` is what ``$VAR``
    resolves to before any ENV (e.g. the sandbox's default PATH).
    """
    context = dockerfile.parent.resolve()
    image = Image()
    args: dict[str, str] = {}
    seen_from = False
    for ins in parse(dockerfile.read_text(encoding="utf-8")):
        where = f"{dockerfile}:{ins.line}"
        variables = {**(base_env or {}), **args, **image.env}
        if ins.keyword == "FROM":
            if seen_from:
                raise DockerfileError(f"{where}: multi-stage builds (a second FROM) {_HARBOR_HINT}")
            seen_from = True
            words = [w for w in ins.args.split() if not w.startswith("--")]
            image.base = _expand(words[0], variables) if words else ""
        elif ins.keyword == "ARG":
            name, eq, default = ins.args.partition("=")
            args[name.strip()] = (
                _expand(default.strip().strip('"'), variables) if eq else args.get(name.strip(), "")
            )
        elif ins.keyword == "ENV":
            image.env.update(_env_pairs(ins.args, variables, where))
        elif ins.keyword == "WORKDIR":
            image.workdir = posixpath.normpath(posixpath.join(image.workdir, _expand(ins.args, variables)))
        elif ins.keyword in ("COPY", "ADD"):
            _copy(ins, where, context, root, image, variables)
        elif ins.keyword not in IGNORED:
            raise DockerfileError(
                f"{where}: the local sandbox cannot build `{ins.keyword}`: {_HARBOR_HINT}"
            )
    if not seen_from:
        raise DockerfileError(f"{dockerfile}: no FROM instruction; this is not a Dockerfile")
    _add_mount_point(image, image.workdir, f"{dockerfile}: WORKDIR")
    (root / image.workdir.lstrip("/")).mkdir(parents=True, exist_ok=True)
    return image


_HARBOR_HINT = (
    "it only materialises FROM (not pulled), WORKDIR, COPY/ADD of local files, ENV and ARG "
    "on top of the host's read-only root; run this task with the `harbor` sandbox "
    "(Docker, k8s, Modal, ...) or move the step into the task's files"
)


def _expand(value: str, variables: dict[str, str]) -> str:
    """Substitute $VAR, ${VAR}, ${VAR:-default} and ${VAR:+alt}; \\$ is a literal $."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "\\$":
            return "$"
        current = variables.get(m["name"] or m["bare"], "")
        if m["op"] == "-":
            return current or m["word"]
        if m["op"] == "+":
            return m["word"] if current else ""
        return current

    return _VAR.sub(sub, value)


def _env_pairs(text: str, variables: dict[str, str], where: str) -> dict[str, str]:
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise DockerfileError(f"{where}: cannot parse ENV: {exc}") from exc
    if words and "=" not in words[0]:
        if len(words) < 2:
            raise DockerfileError(f"{where}: ENV needs KEY=VALUE (or KEY VALUE)")
        return {words[0]: _expand(" ".join(words[1:]), variables)}
    pairs: dict[str, str] = {}
    for word in words:
        key, eq, value = word.partition("=")
        if not eq or not key:
            raise DockerfileError(f"{where}: ENV expects KEY=VALUE pairs, got {word!r}")
        pairs[key] = _expand(value, variables)
    return pairs


def _copy(
    ins: Instruction, where: str, context: Path, root: Path, image: Image, variables: dict[str, str]
) -> None:
    try:
        words = json.loads(ins.args) if ins.args.startswith("[") else shlex.split(ins.args)
    except ValueError as exc:
        raise DockerfileError(f"{where}: cannot parse {ins.keyword} arguments: {exc}") from exc
    chmod = None
    while words and words[0].startswith("--"):
        flag = words.pop(0)
        if flag.startswith("--chmod="):
            chmod = int(flag.split("=", 1)[1], 8)
        elif flag.startswith("--from="):
            raise DockerfileError(f"{where}: {ins.keyword} --from (another stage or image) {_HARBOR_HINT}")
    if len(words) < 2 or any("<<" in w for w in words):
        raise DockerfileError(f"{where}: {ins.keyword} needs local sources and a destination (no heredocs)")
    *sources, dest = [_expand(w, variables) for w in words]
    if ins.keyword == "ADD" and any(re.match(r"^[a-z]+://", s) or _is_archive(s) for s in sources):
        raise DockerfileError(f"{where}: ADD of a URL or an archive {_HARBOR_HINT}")
    dest = posixpath.normpath(posixpath.join(image.workdir, dest)) + ("/" if dest.endswith("/") else "")
    matches = [m for s in sources for m in _context_paths(s, context, where)]
    into_dir = dest.endswith("/") or len(matches) > 1
    for src in matches:
        inside = dest.rstrip("/") or "/"
        if src.is_file() and into_dir:
            inside = posixpath.join(inside, src.name)
        target = root / inside.lstrip("/")
        if src.is_dir():
            shutil.copytree(src, target, symlinks=True, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
        if chmod is not None:
            _chmod_tree(target, chmod)
        _add_mount_point(image, inside, where)


def _context_paths(pattern: str, context: Path, where: str) -> list[Path]:
    found = sorted(glob.glob(str(context / pattern)))
    if not found:
        raise DockerfileError(f"{where}: COPY source {pattern!r} not found in the build context {context}")
    paths = [Path(p).resolve() for p in found]
    for p in paths:
        if not p.is_relative_to(context):
            raise DockerfileError(
                f"{where}: COPY source {pattern!r} is outside the build context {context}"
            )
    return paths


def _is_archive(source: str) -> bool:
    return source.endswith((".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz"))


def _chmod_tree(path: Path, mode: int) -> None:
    for p in [path, *path.rglob("*")] if path.is_dir() else [path]:
        if not p.is_symlink():
            os.chmod(p, mode)


def _add_mount_point(image: Image, inside: str, where: str) -> None:
    """Record ``inside`` unless an existing mount point already covers it."""
    if inside == "/":
        raise DockerfileError(
            f"{where}: the local sandbox cannot COPY onto / or work in / "
            "(set WORKDIR to a directory such as /app)"
        )
    if any(inside == m or inside.startswith(m + "/") for m in image.mount_points):
        return
    image.mount_points = [m for m in image.mount_points if not m.startswith(inside + "/")] + [inside]


def own_paths(text: str) -> list[str]:
    """Where a Dockerfile's last stage puts the task's own files: its WORKDIRs and the targets of
    its COPY and ADD (those named by a variable left out)."""
    workdir, roots = "/", list[str]()
    for ins in parse(text):
        if ins.keyword == "FROM":
            workdir, roots = "/", []
        elif ins.keyword == "WORKDIR":
            workdir = posixpath.normpath(posixpath.join(workdir, ins.args.strip().strip('"')))
            roots.append(workdir)
        elif ins.keyword in ("COPY", "ADD"):
            target = _copy_target(ins.args)
            if target and "$" not in target:
                roots.append(posixpath.normpath(posixpath.join(workdir, target)))
    return sorted(set(roots))


def _copy_target(args: str) -> str:
    """The destination of COPY/ADD arguments (shell or JSON form, flags skipped), '' if there is
    none or it cannot be told (a heredoc)."""
    try:
        words = json.loads(args) if args.startswith("[") else shlex.split(args)
    except ValueError:
        return ""
    words = [w for w in words if not str(w).startswith("--")] if isinstance(words, list) else []
    if len(words) < 2 or any("<<" in str(w) for w in words):
        return ""
    return str(words[-1])
