"""One SWE-bench instance -> one Harbor task directory.

``environment/Dockerfile`` names the instance's image (for Harbor's container backends); with a
local mirror of the repository it also copies a checkout of ``base_commit`` (one shallow
commit, so no later history leaks) to ``/testbed``, which is all the local sandbox needs.
``tests/eval.sh`` is the instance's own eval script, or one generated in its shape: reset the
test files, apply ``test_patch``, run the tests between swebench's markers, record the exit
code. ``tests/test.sh`` has pytest load the verifier's test reporter where one is offered and
keeps the log in ``/logs/verifier/test_output.txt`` for the ``swe-bench`` verifier and writes ``reward.txt`` from the test command's exit code alone (an
approximation for the plain ``test-script`` verifier). ``tests/instance.json`` is what the
verifier grades against.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

from legorl_swe_bench.instances import Instance

INSTANCE_FILE = "instance.json"
LOG_FILE = "test_output.txt"
TESTBED = "/testbed"
DEFAULT_IMAGE = "swebench/sweb.eval.x86_64.{key}:latest"
"""SWE-bench's published image names; ``{key}`` is the instance id, lower-cased, ``__`` -> ``_1776_``."""

TEST_SH = """#!/bin/bash
# SWE-bench {instance_id}: run the eval script and keep its log for the swe-bench verifier.
# Where a verifier offers its test reporter as a pytest plugin, pytest loads it (what each
# test did goes to the verifier's result stream, beside the log).
if [ -n "${{LEGORL_PYTEST_PLUGIN:-}}" ]; then
  export PYTHONPATH="$LEGORL_PYTEST_PLUGIN_DIR${{PYTHONPATH:+:$PYTHONPATH}}"
  export PYTEST_PLUGINS="$LEGORL_PYTEST_PLUGIN${{PYTEST_PLUGINS:+,$PYTEST_PLUGINS}}"
fi
mkdir -p /logs/verifier
bash /tests/eval.sh > /logs/verifier/{log} 2>&1
code=$(sed -n 's/^{exit_marker}: *//p' /logs/verifier/{log} | tail -n 1)
if [ "$code" = 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
tail -c 3000 /logs/verifier/{log}
exit 0
"""


class CheckoutError(RuntimeError):
    """The repository mirror lacks the instance's base commit, or git failed."""


def image_name(instance: Instance, template: str = DEFAULT_IMAGE) -> str:
    if instance.image:
        return instance.image
    return template.format(key=instance.instance_id.lower().replace("__", "_1776_"))


def write_task(
    instance: Instance,
    dest: Path,
    *,
    mirror: Path | None,
    test_cmd: str,
    log_parser: str,
    image_template: str = DEFAULT_IMAGE,
    agent_timeout_sec: float,
    verifier_timeout_sec: float,
    metadata: dict[str, Any] | None = None,
) -> None:
    """Write the task directory ``dest`` (which must not exist yet); ``metadata`` adds to
    task.toml's ``[metadata]`` (what the task source knows of the instance's origin)."""
    image = image_name(instance, image_template)
    (dest / "environment").mkdir(parents=True)
    (dest / "tests").mkdir()
    dockerfile = f"FROM {image}\nWORKDIR {TESTBED}\n"
    if mirror is not None:
        checkout(mirror, instance.base_commit, dest / "environment" / "testbed")
        dockerfile += f"COPY testbed/ {TESTBED}/\n"
    (dest / "environment" / "Dockerfile").write_text(dockerfile)
    (dest / "task.toml").write_text(
        _task_toml(instance, image if mirror is None else None, agent_timeout_sec, verifier_timeout_sec, metadata or {})
    )
    (dest / "instruction.md").write_text(_instruction(instance))
    eval_script = instance.eval_script or generated_eval_script(instance, test_cmd)
    (dest / "tests" / "eval.sh").write_text(eval_script)
    (dest / "tests" / "test.sh").write_text(TEST_SH.format(
        instance_id=instance.instance_id, log=LOG_FILE, exit_marker=_exit_marker()
    ))  # fmt: skip
    graded = {
        "instance_id": instance.instance_id,
        "repo": instance.repo,
        "version": instance.version,
        "image": image,
        "FAIL_TO_PASS": instance.FAIL_TO_PASS,
        "PASS_TO_PASS": instance.PASS_TO_PASS,
        "log_parser": instance.log_parser or log_parser,
        "eval_type": instance.eval_type or "pass_and_fail",
    }
    (dest / "tests" / INSTANCE_FILE).write_text(json.dumps(graded, indent=1) + "\n")
    if instance.patch:
        (dest / "solution").mkdir()
        (dest / "solution" / "solve.sh").write_text(
            f"#!/bin/bash\nset -e\ncd {TESTBED}\n{_apply(instance.patch, '')}\n"
        )


def generated_eval_script(instance: Instance, test_cmd: str) -> str:
    """An eval script in swebench's shape for an instance that ships none."""
    from swebench.harness.constants import (
        APPLY_PATCH_FAIL,
        END_TEST_OUTPUT,
        START_TEST_OUTPUT,
    )
    from swebench.harness.utils import record_test_exit_code
    from unidiff import PatchSet

    files = PatchSet(instance.test_patch)
    existing = [f.path for f in files if not f.is_added_file]
    added = [f.path for f in files if f.is_added_file]
    run = [f.path for f in files if not f.is_removed_file]
    base = shlex.quote(instance.base_commit)
    reset = [f"git checkout {base} -- {_args(existing)}"] if existing else []
    lines = [
        f"cd {TESTBED}",
        *reset,
        *([f"rm -rf -- {_args(added)}"] if added else []),
        _apply(instance.test_patch, f' || {{ echo "{APPLY_PATCH_FAIL}"; exit 1; }}'),
        f"echo '{START_TEST_OUTPUT}'",
        f"{test_cmd} {_args(run)}",
        f"echo '{END_TEST_OUTPUT}'",
        *reset,
        *([f"rm -rf -- {_args(added)}"] if added else []),
    ]
    return (
        "#!/bin/bash\nset -uo pipefail\n"
        + "\n".join(record_test_exit_code(lines))
        + "\n"
    )


def checkout(mirror: Path, commit: str, dest: Path) -> None:
    """``dest`` := a one-commit git checkout of ``commit`` from the local ``mirror`` (no network)."""
    dest.mkdir(parents=True)
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
           "PATH": "/usr/local/bin:/usr/bin:/bin"}  # fmt: skip
    steps = (
        ["git", "init", "-q"],
        ["git", "-c", "protocol.file.allow=always", "fetch", "-q", "--depth=1",
         f"file://{mirror.resolve()}", commit],
        ["git", "checkout", "-q", "--detach", "FETCH_HEAD"],
        ["git", "update-ref", "-d", "FETCH_HEAD"],
    )  # fmt: skip
    for argv in steps:
        done = subprocess.run(
            argv, cwd=dest, env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise CheckoutError(
                f"checking out {commit} from the mirror {mirror} failed ({' '.join(argv[:2])}...): "
                f"{done.stderr.strip()[-500:]}"
            )


def _exit_marker() -> str:
    from swebench.harness.constants import TEST_EXIT_CODE

    return TEST_EXIT_CODE


def _apply(patch: str, on_failure: str) -> str:
    from swebench.utils import generate_heredoc_delimiter

    end = generate_heredoc_delimiter(patch)
    body = patch if patch.endswith("\n") else patch + "\n"
    return f"git apply --verbose - <<'{end}'{on_failure}\n{body}{end}"


def _args(paths: list[str]) -> str:
    return " ".join(shlex.quote(p) for p in paths)


def _instruction(instance: Instance) -> str:
    return (
        f"{instance.problem_statement.strip()}\n\n---\n\n"
        f"The repository {instance.repo} is checked out at {TESTBED}. Resolve the issue above by "
        "changing its source code; the hidden tests that check it are not yours to edit.\n"
    )


def _task_toml(
    instance: Instance, prebuilt: str | None, agent_timeout: float, verifier_timeout: float, extra: dict[str, Any]
) -> str:
    """task.toml; ``prebuilt``: the image that already holds the repository (SWE-bench's own
    instance images), none where the Dockerfile copies it in."""
    meta: dict[str, Any] = {
        "source": "swe-bench",
        "instance_id": instance.instance_id,
        "repo": instance.repo,
        "base_commit": instance.base_commit,
        "version": instance.version,
        "category": "swe-bench",
    }
    if instance.environment_setup_commit:
        meta["environment_setup_commit"] = instance.environment_setup_commit
    meta.update(extra)
    lines = ['version = "1.0"', "", "[metadata]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in meta.items()]
    lines += ["", "[agent]", f"timeout_sec = {float(agent_timeout)}"]
    lines += ["", "[verifier]", f"timeout_sec = {float(verifier_timeout)}"]
    if prebuilt:  # Harbor runs this image instead of building the Dockerfile
        lines += ["", "[environment]", f"docker_image = {json.dumps(prebuilt)}"]
    lines += [""]
    return "\n".join(lines)
