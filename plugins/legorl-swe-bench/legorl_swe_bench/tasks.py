"""Task source ``swe-bench``: SWE-bench instances from a local file as Harbor task directories.

The set is written once into a cache directory keyed by the instance file's content and the
options (:func:`ensure_tasks`); :func:`legorl_std.tasks.harbor_dir.load_task` reads each back.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from pathlib import Path
from typing import Any

from legorl_std.tasks.cache import cache_root, cached_task_set
from legorl_std.tasks.harbor_dir import load_task
from pydantic import BaseModel, ConfigDict, Field

from lego_rl import hookimpl
from lego_rl.kinds import Problem, Task
from lego_rl.registry import BuildContext
from legorl_swe_bench.harbor import DEFAULT_IMAGE, write_task
from legorl_swe_bench.instances import Instance, InstanceError, read_instances

FORMAT_VERSION = 1
"""Bumped whenever the written task layout changes, so older caches are not reused."""
EXAMPLE = Path(__file__).parent / "examples" / "instances.jsonl"


class SweBenchOptions(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"instances": str(EXAMPLE)}]}
    )

    instances: str = Field(
        description="SWE-bench instances: a local .jsonl (or .json, or .parquet with pyarrow) file "
        "(relative to the spec)."
    )
    repos: str | None = Field(
        default=None,
        description="Directory of local git mirrors, one per repository, named owner__name (or "
        "owner/name): each task then carries a checkout of its base commit for the local "
        "sandbox. Without it, tasks name only the instance's image (Harbor container backends).",
    )
    include: list[str] = Field(
        default_factory=list, description="Glob patterns of instance ids to keep."
    )
    exclude: list[str] = Field(
        default_factory=list, description="Glob patterns of instance ids to drop."
    )
    test_cmd: str = Field(
        default="pytest -rA",
        description="Test command for instances without an eval_script or test_cmd of their own; "
        "the test files of test_patch are appended.",
    )
    log_parser: str = Field(
        default="parse_log_pytest",
        description="swebench log parser (a PARSER_REGISTRY name) for instances that name none.",
    )
    image: str = Field(
        default=DEFAULT_IMAGE,
        description="Image name template for instances without one.",
    )
    agent_timeout_sec: float = Field(
        default=3000.0, gt=0, description="task.toml [agent] timeout_sec."
    )
    verifier_timeout_sec: float = Field(
        default=1800.0, gt=0, description="task.toml [verifier] timeout_sec."
    )
    dir: str | None = Field(
        default=None,
        description="Cache directory (relative to the spec); default <run dir>/swe-bench, "
        "or ~/.cache/legorl/swe-bench without a run.",
    )


class SweBenchTasks:
    """SWE-bench instances as Harbor tasks (written to the cache on the first ``tasks()``)."""

    def __init__(
        self, options: SweBenchOptions, source: Path, repos: Path | None, root: Path
    ):
        self.options = options
        self.source = source
        self.repos = repos
        self.root = root

    def preflight(self) -> list[Problem]:
        problems = []
        if not self.source.is_file():
            problems.append(Problem(f"SWE-bench instance file {self.source} does not exist",
                                    "set tasks.options.instances to a local .jsonl or .parquet file"))  # fmt: skip
        if self.repos is not None and not self.repos.is_dir():
            problems.append(Problem(f"repository mirrors directory {self.repos} does not exist",
                                    "set tasks.options.repos to a directory of git mirrors"))  # fmt: skip
        return problems

    def tasks(self) -> list[Task]:
        instances = [
            i for i in read_instances(self.source) if self._selected(i.instance_id)
        ]
        if not instances:
            raise InstanceError(
                f"no instance in {self.source} matches include={self.options.include} "
                f"exclude={self.options.exclude}"
            )
        return [
            load_task(d)
            for d in ensure_tasks(self.root, instances, self.options, self.repos)
        ]

    def _selected(self, name: str) -> bool:
        o = self.options
        if o.include and not any(fnmatch.fnmatchcase(name, p) for p in o.include):
            return False
        return not any(fnmatch.fnmatchcase(name, p) for p in o.exclude)


def ensure_tasks(
    root: Path, instances: list[Instance], options: SweBenchOptions, repos: Path | None
) -> list[Path]:
    """The task directories of these instances and options under ``root``, written if not there yet."""

    def write(scratch: Path) -> dict[str, object]:
        for instance in instances:
            write_task(
                instance, scratch / instance.instance_id,
                mirror=mirror_of(repos, instance.repo) if repos is not None else None,
                test_cmd=instance.test_cmd or options.test_cmd, log_parser=options.log_parser,
                image_template=options.image, agent_timeout_sec=options.agent_timeout_sec,
                verifier_timeout_sec=options.verifier_timeout_sec,
            )  # fmt: skip
            for script in (scratch / instance.instance_id).glob("*/*.sh"):
                script.chmod(0o755)
        return {"tasks": [i.instance_id for i in instances]}

    return cached_task_set(root / cache_key(instances, options, repos), write)


def cache_key(
    instances: list[Instance], options: SweBenchOptions, repos: Path | None
) -> str:
    """Same instances, options and mirrors directory -> same cache directory."""
    data = {
        "format": FORMAT_VERSION,
        "instances": [i.model_dump() for i in instances],
        "options": options.model_dump(
            exclude={"instances", "dir", "repos", "include", "exclude"}
        ),
        "repos": str(repos) if repos is not None else None,
    }
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    return f"set-{digest[:16]}"


def mirror_of(repos: Path, repo: str) -> Path:
    """The local git mirror of ``owner/name`` under ``repos``."""
    candidates = [
        repos / repo.replace("/", "__"),
        repos / repo,
        repos / f"{repo.replace('/', '__')}.git",
    ]
    for path in candidates:
        if path.is_dir():
            return path
    raise InstanceError(
        f"no local mirror of {repo} under {repos} (looked for {', '.join(str(c) for c in candidates)}; "
        f"clone it there, e.g. git clone --mirror <url> {candidates[0]})"
    )


def build(options: SweBenchOptions, ctx: BuildContext) -> SweBenchTasks:
    """SWE-bench instances from a local JSONL/parquet file as Harbor tasks (image or local checkout)."""
    root = cache_root(options.dir, ctx, "swe-bench")
    repos = ctx.path(options.repos) if options.repos is not None else None
    return SweBenchTasks(options, ctx.path(options.instances), repos, root)


@hookimpl
def legorl_register_tasks(register: Any) -> None:
    register("swe-bench", build, options=SweBenchOptions)
