"""``legorl bench docker``: what the docker sandbox costs.

- ``image_build_s``: a task image built cold (a context no build saw), ``image_cached_ms``: found.
- ``container_start_*``: creating and starting one container (its init up), ``exec_true_*``: one
  ``docker exec`` of ``true`` through the wrapper, ``stop_*``: a trial's stop.
- ``seal_*``: ``begin_agent`` after a before-agent command that changed a file (diff + commit),
  ``to_verify_*``: ``begin_verify`` with a one-file change (diff, the roots' tar, a fresh container).
- ``trial_*``: a whole ``TrialRunner`` trial of the kit's fix-add (the scripted oracle, the
  test-script verifier, no anti-cheat) on this sandbox and, for contrast, on ``local``; their
  difference is the docker sandbox's overhead per trial.

Needs a daemon (``--host``, else ``$LEGORL_DOCKER_HOST``/``$DOCKER_HOST``) and the base image.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from legorl_std.sandbox.bench import percentiles, trial_seconds

from lego_rl.kinds import Task
from lego_rl.registry import default_registry
from lego_rl.testing.contracts.base import ContractEnv
from legorl_docker.container import Container
from legorl_docker.options import DockerOptions
from legorl_docker.plugin import DockerBackend


def _task(root: Path, env: ContractEnv) -> Task:
    """fix-add with a context no build saw (a cold image build)."""
    task = env.task("fix-add")
    copy = root / f"fix-add-{secrets.token_hex(4)}"
    shutil.copytree(task.path, copy)
    (copy / "environment" / "app" / "bench.txt").write_text(copy.name)
    return task.model_copy(update={"path": copy, "name": copy.name})


def main(args: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="legorl bench docker")
    parser.add_argument("--host", help="the Docker daemon (a DOCKER_HOST URL)")
    parser.add_argument("--trials", type=int, default=10)
    opts = parser.parse_args(args)
    root = Path(tempfile.mkdtemp(prefix="legorl-bench-docker-", dir="/var/tmp"))
    registry = default_registry()
    env = ContractEnv(root, registry)
    ctx = env.build_context()
    backend = DockerBackend(DockerOptions(host=opts.host, keep=False), ctx)
    figures: dict[str, Any] = {"trials": opts.trials, "daemon": backend.docker.address}
    task = _task(root, env)
    t0 = time.perf_counter()
    backend.start(task, "bench-build").stop()
    figures["image_build_s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    backend.images.get(task)
    figures["image_cached_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    starts, execs, stops, seals, moves = [], [], [], [], []
    for i in range(opts.trials):
        box = backend.start(task, f"bench-{i}")
        try:
            t0 = time.perf_counter()
            container = box._current()
            starts.append(time.perf_counter() - t0)
            assert isinstance(container, Container)
            t0 = time.perf_counter()
            box.exec("true", timeout=30)
            execs.append(time.perf_counter() - t0)
            box.exec("echo checked > /app/checked.md", timeout=30)
            t0 = time.perf_counter()
            box.begin_agent()
            seals.append(time.perf_counter() - t0)
            box.exec("sed -i 's/a - b/a + b/' /app/calc.py", timeout=30)
            t0 = time.perf_counter()
            box.begin_verify(task)
            moves.append(time.perf_counter() - t0)
        finally:
            t0 = time.perf_counter()
            box.stop()
            stops.append(time.perf_counter() - t0)
    for name, samples in (("container_start", starts), ("exec_true", execs), ("seal", seals), ("to_verify", moves), ("stop", stops)):
        figures[f"{name}_p50_ms"], figures[f"{name}_p99_ms"] = percentiles(samples)
    local = registry.build("sandbox", "local", {"keep": False}, ctx)
    trials = {"docker": [trial_seconds(registry, ctx, backend, task, f"bench-trial-{i}") for i in range(opts.trials)]}
    trials["local"] = [trial_seconds(registry, ctx, local, task, f"bench-local-{i}") for i in range(opts.trials)]
    for name, samples in trials.items():
        figures[f"trial_{name}_p50_ms"], figures[f"trial_{name}_p99_ms"] = percentiles(samples)
    figures["trial_overhead_p50_ms"] = round(figures["trial_docker_p50_ms"] - figures["trial_local_p50_ms"], 1)
    backend.docker.run("rmi", "--force", backend.images.get(task).tag, check=False)
    shutil.rmtree(root, ignore_errors=True)
    for line in (f"{k}: {v}" for k, v in figures.items()):
        print(line)
    return figures
