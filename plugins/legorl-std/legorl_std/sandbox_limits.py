"""Resource limits of one sandboxed command, applied with util-linux ``prlimit``.

Limits are per process (CPU time, address space, file size, open files) except ``nproc``,
which counts every process of the sandbox's user; the local sandbox gives each trial its
own user id, so a fork bomb exhausts only its own trial's budget.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cpu_seconds: int | None = Field(default=3600, gt=0, description="CPU time per process (RLIMIT_CPU).")
    address_space_mb: int | None = Field(
        default=8192,
        gt=0,
        description="Virtual memory per process (RLIMIT_AS); null for runtimes that reserve "
        "large address ranges (e.g. Node).",
    )
    nproc: int | None = Field(default=512, gt=0, description="Processes of the trial's user (RLIMIT_NPROC).")
    file_size_mb: int | None = Field(default=1024, gt=0, description="Largest file a process may write (RLIMIT_FSIZE).")
    open_files: int | None = Field(default=4096, gt=0, description="Open file descriptors per process (RLIMIT_NOFILE).")

    def prlimit_args(self) -> list[str]:
        """``prlimit`` options for the set limits (soft = hard), e.g. ``["--cpu=60"]``."""
        mb = 1 << 20
        pairs = (
            ("cpu", self.cpu_seconds),
            ("as", self.address_space_mb and self.address_space_mb * mb),
            ("nproc", self.nproc),
            ("fsize", self.file_size_mb and self.file_size_mb * mb),
            ("nofile", self.open_files),
        )
        return [f"--{name}={value}" for name, value in pairs if value]
