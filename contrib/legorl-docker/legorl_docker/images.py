"""A task's image: its ``environment/Dockerfile`` built by the daemon, offline, cached by input.

No registry is reachable: a ``FROM`` image the daemon does not have is replaced by the one
``base_images`` maps it to, else by ``fallback_base`` (the offline base image, see
:mod:`legorl_docker.base`); the replacement is recorded. Every build runs with ``--network
none`` (the classic builder, so that holds for each ``RUN``). A last layer prepares the image
for trials: the trial user ``agent`` (``uid:gid``), ``/logs/{agent,verifier,artifacts}``,
``/home/agent``, ``/run/legorl``, and the task's own files (the workdir and every ``COPY``/
``ADD`` target of the last stage: the crossing roots) owned by that user.

The tag is ``legorl/task:<key>``, the key a digest of the rewritten Dockerfile, the build
context's files (names, modes, contents), the replacement images' ids and this recipe.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import posixpath
import re
import shlex
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from legorl_std.sandbox import image_needs
from legorl_std.sandbox.dockerfile import own_paths, parse

from lego_rl.kinds import Task
from legorl_docker.cli import Docker

RECIPE = 2
HOME = "/home/agent"
LOG_DIRS = ("/logs/agent", "/logs/verifier", "/logs/artifacts")
BUILD_TAIL = 40
"""Lines of the build log a failed build's error quotes."""
NEEDS = "legorl-docker needs"
"""How the image check's message starts (found in a failed build's log; the check's source,
which the log echoes, spells it in two pieces)."""
CHECK = (
    "import os, sys; path = os.environ.get('PATH', '').split(':'); "
    "missing = [n for n in ('bash', 'sh') if not any(os.access(os.path.join(d, n), os.X_OK) for d in path if d)]; "
    "missing and sys.exit('legorl-docker' ' needs ' + ' and '.join(missing) + ' on PATH in the task image ' "
    "'(every command of a trial runs as bash -c); found none in ' + ':'.join(path))"
)
"""The first step of the trial layer, exec form (no shell needed): what the sandbox itself runs
in every container (python3: its init and command wrapper; bash) is in the image."""
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_VAR = re.compile(r"\$\{?(\w+)\}?")


class ImageBuildError(RuntimeError):
    """The task's image cannot be built (the message quotes the build log's tail)."""


@dataclass(frozen=True)
class TaskImage:
    tag: str
    key: str
    workdir: str
    roots: tuple[str, ...]
    """The task's own files inside (workdir, COPY/ADD targets): what of the agent's change may cross."""
    env: dict[str, str]
    size: int
    """Bytes (the daemon's figure)."""
    replaced: dict[str, str] = field(default_factory=dict)
    """FROM image -> the local image used instead."""
    built: bool = False
    seconds: float = 0.0


@dataclass
class _Plan:
    text: str
    roots: list[str]
    replaced: dict[str, str]


class TaskImages:
    """Builds (once per key) and finds task images."""

    def __init__(
        self,
        docker: Docker,
        user: tuple[int, int],
        *,
        base_images: dict[str, str],
        fallback_base: str | None,
        log_dir: Path,
        timeout: float,
    ):
        self.docker = docker
        self.user = user
        self.base_images = base_images
        self.fallback_base = fallback_base
        self.log_dir = log_dir
        self.timeout = timeout
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, task: Task) -> TaskImage:
        dockerfile = task.path / "environment" / "Dockerfile"
        if not dockerfile.is_file():
            image = task.config.get("environment", {}).get("docker_image")
            hint = f" (it names the prebuilt image {image!r}: no registry is reachable)" if image else ""
            raise ImageBuildError(f"task {task.name} has no {dockerfile}{hint}")
        plan = self._plan(task, dockerfile)
        key = self._key(plan, dockerfile.parent)
        tag = f"legorl/task:{key}"
        with self._lock(key):
            built, seconds = False, 0.0
            if not self.docker.image_exists(tag):
                start = time.monotonic()
                self._build(task, plan, dockerfile.parent, tag, key)
                built, seconds = True, time.monotonic() - start
        info = json.loads(self.docker.text("image", "inspect", "--format", "{{json .}}", tag))
        config = info.get("Config") or {}
        env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
        workdir = config.get("WorkingDir") or "/"
        roots = sorted({posixpath.normpath(r) for r in [*plan.roots, workdir]})
        return TaskImage(tag, key, workdir, tuple(roots), env, int(info.get("Size", 0)), plan.replaced, built, seconds)

    # ------------------------------------------------------------------ the Dockerfile

    def _plan(self, task: Task, dockerfile: Path) -> _Plan:
        """The Dockerfile with replaced FROMs and the trial layer; the last stage's roots."""
        text = dockerfile.read_text(encoding="utf-8")
        instructions, lines = parse(text), text.splitlines()
        args: dict[str, str] = {}
        stages: set[str] = set()
        replaced: dict[str, str] = {}
        rewritten: dict[int, str] = {}
        seen_from = False
        for ins in instructions:
            if ins.keyword == "ARG" and not seen_from:
                name, eq, default = ins.args.partition("=")
                args[name.strip()] = default.strip().strip('"') if eq else ""
            elif ins.keyword == "FROM":
                seen_from = True
                words = [w for w in ins.args.split() if not w.startswith("--")]
                ref = _VAR.sub(lambda m: args.get(m.group(1), ""), words[0]) if words else ""
                if len(words) >= 3 and words[1].lower() == "as":
                    stages.add(words[2])
                if ref in stages or ref == "scratch":
                    continue
                local = self._local_base(task, ref, dockerfile, ins.line)
                if local != ref:
                    replaced[ref] = local
                    flags = [w for w in ins.args.split() if w.startswith("--")]
                    rewritten[ins.line] = " ".join(["FROM", *flags, local, *words[1:]])
        roots = own_paths(text)
        out = []
        skip_to = 0
        for number, line in enumerate(lines, 1):
            if number < skip_to:
                continue
            if number in rewritten:
                out.append(rewritten[number])
                while line.rstrip().endswith("\\") and number < len(lines):  # a FROM continued
                    number += 1
                    line = lines[number - 1]
                skip_to = number + 1
                continue
            out.append(line)
        if not roots:
            raise ImageBuildError(
                f"{dockerfile}: the last stage works in / (no WORKDIR): set WORKDIR to the task's "
                "directory (e.g. /app), which is what the agent's change may cross from"
            )
        if "/" in roots:
            raise ImageBuildError(f"{dockerfile}: a COPY/WORKDIR onto / makes the whole file system the task's files")
        out += [
            "", "# lego-rl: what the sandbox runs inside; the trial user, its dirs, the task's files its own",
            "USER 0:0", f"RUN {json.dumps(['python3', '-I', '-S', '-c', CHECK])}", f"RUN {self._trial_layer(roots)}",
        ]  # fmt: skip
        return _Plan("\n".join(out) + "\n", roots, replaced)

    def _local_base(self, task: Task, ref: str, dockerfile: Path, line: int) -> str:
        if ref in self.base_images:
            local = self.base_images[ref]
        elif self.docker.image_exists(ref):
            return ref
        elif self.fallback_base:
            local = self.fallback_base
        else:
            raise ImageBuildError(
                f"{dockerfile}:{line}: FROM {ref}: the daemon has no such image and no registry is "
                "reachable; map it to a local image (options.base_images) or set options.fallback_base"
            )
        if not self.docker.image_exists(local):
            raise ImageBuildError(
                f"{dockerfile}:{line}: FROM {ref} is built on {local}, which the daemon does not have: "
                f"build it (python -m legorl_docker.base --host {self.docker.address})"
            )
        return local

    def _trial_layer(self, roots: list[str]) -> str:
        uid, gid = self.user
        own = " ".join(shlex.quote(r) for r in roots)
        dirs = " ".join([*LOG_DIRS, HOME])
        return (
            f"set -e; mkdir -p {dirs} /run/legorl; "
            f"grep -q '^agent:' /etc/group || echo 'agent:x:{gid}:' >> /etc/group; "
            f"grep -q '^agent:' /etc/passwd || echo 'agent:x:{uid}:{gid}:agent:{HOME}:/bin/bash' >> /etc/passwd; "
            f"chown {uid}:{gid} {dirs}; chmod 700 /run/legorl; "
            f"for r in {own}; do if [ -e \"$r\" ]; then chown -R {uid}:{gid} \"$r\"; fi; done"
        )

    def _key(self, plan: _Plan, context: Path) -> str:
        digest = hashlib.sha256(f"recipe {RECIPE}\nuser {self.user}\n{plan.text}".encode())
        for local in sorted(set(plan.replaced.values())):
            digest.update(f"base {local} {self.docker.text('image', 'inspect', '--format', '{{.Id}}', local)}\n".encode())
        for path in sorted(context.rglob("*")):
            rel = path.relative_to(context).as_posix()
            info = path.lstat()
            digest.update(f"{rel} {info.st_mode:o}\n".encode())
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            elif path.is_file():
                digest.update(hashlib.sha256(path.read_bytes()).digest())
        return digest.hexdigest()[:20]

    # ------------------------------------------------------------------ building

    def _build(self, task: Task, plan: _Plan, context: Path, tag: str, key: str) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{key}.log"
        with tempfile.TemporaryDirectory(prefix="legorl-docker-build-") as tmp:
            dockerfile = Path(tmp) / "Dockerfile"
            dockerfile.write_text(plan.text)
            argv = [
                "build", "--network", "none", "--force-rm", "--file", str(dockerfile), "--tag", tag,
                "--label", f"legorl.task={task.name}", "--label", f"legorl.key={key}", str(context),
            ]  # fmt: skip
            with open(log, "wb") as out:
                proc = self.docker.popen(*argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
                try:
                    code = proc.wait(timeout=self.timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    code = None
        if code != 0:
            lines = log.read_text(errors="replace").splitlines()
            if (lacking := _lacking(lines)) is not None:
                raise ImageBuildError(image_needs.message("docker", f"{task.name} ({context}/Dockerfile)", lacking))
            tail = "\n".join(lines[-BUILD_TAIL:])
            what = f"ran past {self.timeout:g} s" if code is None else f"exit {code}"
            raise ImageBuildError(
                f"building the image of task {task.name} ({context}/Dockerfile) failed ({what}, "
                f"offline: no network in the build); {log} ends:\n{tail}"
            )

    @contextlib.contextmanager
    def _lock(self, key: str) -> Iterator[None]:
        """One build per key, across threads and processes."""
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.log_dir / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)


def _lacking(log: list[str]) -> str | None:
    """What the image check found missing, from a failed build's log (None: something else failed)."""
    for line in log:
        if NEEDS in line:  # the daemon colours a step's stderr
            return _ANSI.sub("", line.split(NEEDS, 1)[1]).strip()
    return image_needs.lacking("\n".join(log))
