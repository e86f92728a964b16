"""The ``docker`` command line, as the plugin calls it: one daemon address, errors that say
which command failed and what the daemon answered."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from typing import IO, Any

CLI_TIMEOUT = 300.0
"""Seconds a plain docker command (create, cp, commit, rm) may take."""


class DockerError(RuntimeError):
    """A docker command failed (infrastructure: the daemon, not the trial's code)."""

    def __init__(self, argv: Sequence[str], code: int | None, stderr: str):
        self.argv = list(argv)
        self.code = code
        self.stderr = stderr.strip()
        shown = " ".join(self.argv[:4]) + (" ..." if len(self.argv) > 4 else "")
        super().__init__(f"`{shown}` failed ({'timed out' if code is None else f'exit {code}'}): {self.stderr[-2000:]}")


class Docker:
    """Runs ``docker`` against one daemon (``host``: a ``DOCKER_HOST`` URL, else the CLI's default)."""

    def __init__(self, host: str | None = None, binary: str = "docker"):
        self.host = host
        self.binary = binary
        self.env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
        if host:
            self.env["DOCKER_HOST"] = host
        elif "DOCKER_HOST" in os.environ:
            self.env["DOCKER_HOST"] = os.environ["DOCKER_HOST"]
        self.env["DOCKER_BUILDKIT"] = "0"  # the classic builder: `--network none` holds for every RUN
        self.env["DOCKER_CLI_HINTS"] = "false"

    @property
    def address(self) -> str:
        return self.env.get("DOCKER_HOST", "the docker CLI's default daemon")

    def path(self) -> str | None:
        return shutil.which(self.binary)

    def argv(self, *args: str) -> list[str]:
        return [self.binary, *args]

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        stdin: IO[bytes] | None = None,
        timeout: float | None = CLI_TIMEOUT,
        check: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``docker ARGS``; raises :class:`DockerError` on a non-zero exit when ``check``."""
        argv = self.argv(*args)
        try:
            done = subprocess.run(
                argv, input=input, stdin=stdin if input is None else None, capture_output=True,
                env=self.env, timeout=timeout, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise DockerError(argv, None, (exc.stderr or b"").decode(errors="replace")) from None
        except FileNotFoundError:
            raise DockerError(argv, 127, f"{self.binary} not found: apt-get install docker.io") from None
        if check and done.returncode != 0:
            raise DockerError(argv, done.returncode, done.stderr.decode(errors="replace"))
        return done

    def text(self, *args: str, timeout: float | None = CLI_TIMEOUT) -> str:
        return self.run(*args, timeout=timeout).stdout.decode(errors="replace").strip()

    def popen(self, *args: str, **kwargs: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.argv(*args), env=self.env, **kwargs)

    def image_exists(self, ref: str) -> bool:
        return self.run("image", "inspect", "--format", "{{.Id}}", ref, check=False, timeout=60).returncode == 0
