"""The parts: how a task's Dockerfile is rewritten for an offline build, how diffs of re-created
containers combine, and that the daemon helper answers for the daemon these tests use."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from legorl_docker import daemon
from legorl_docker.cli import Docker
from legorl_docker.images import ImageBuildError, TaskImages
from legorl_docker.options import HOST_ENV
from legorl_docker.verify import merge

from lego_rl.kinds import Task


def images() -> TaskImages:
    docker = Docker(os.environ[HOST_ENV])
    return TaskImages(
        docker, (61001, 61000), base_images={"ubuntu:22.04": "legorl/base:bookworm"},
        fallback_base="legorl/base:bookworm", log_dir=Path(tempfile.gettempdir()) / "legorl-docker-images", timeout=600,
    )  # fmt: skip


def plan(tmp_path: Path, dockerfile: str):
    (tmp_path / "environment").mkdir(exist_ok=True)
    path = tmp_path / "environment" / "Dockerfile"
    path.write_text(dockerfile)
    return images()._plan(Task(name="t", path=tmp_path, instruction=""), path)


def test_missing_bases_are_replaced_stages_are_not(tmp_path: Path) -> None:
    made = plan(
        tmp_path,
        "ARG PY=3.12\nFROM python:${PY}-slim AS build\nRUN true\n"
        "FROM ubuntu:22.04\nWORKDIR /srv/app\nCOPY --from=build /x ./vendor/\nCOPY app.py /opt/tool.py\n",
    )
    assert made.replaced == {"python:3.12-slim": "legorl/base:bookworm", "ubuntu:22.04": "legorl/base:bookworm"}
    lines = made.text.splitlines()
    assert "FROM legorl/base:bookworm AS build" in lines and "FROM legorl/base:bookworm" in lines
    assert made.roots == ["/opt/tool.py", "/srv/app", "/srv/app/vendor"], "the last stage's own files only"
    assert lines[-3] == "USER 0:0" and lines[-2].startswith('RUN ["python3", "-I", "-S", "-c", ')
    assert "chown -R 61001:61000" in lines[-1], "the check runs first (exec form: no shell needed), then the trial layer"


def test_a_task_working_in_the_root_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match="set WORKDIR"):
        plan(tmp_path, "FROM legorl/base:bookworm\nRUN true\n")


def test_without_a_fallback_a_missing_base_names_the_options(tmp_path: Path) -> None:
    builder = images()
    builder.fallback_base = None
    (tmp_path / "environment").mkdir()
    (tmp_path / "environment" / "Dockerfile").write_text("FROM nosuch/image:1\nWORKDIR /app\n")
    with pytest.raises(ImageBuildError, match="no registry is reachable.*base_images"):
        builder._plan(Task(name="t", path=tmp_path, instruction=""), tmp_path / "environment" / "Dockerfile")


def test_diffs_of_a_recreated_container_combine() -> None:
    earlier = [("added", "/app/a"), ("modified", "/app/b"), ("deleted", "/app/c"), ("added", "/app/d")]
    later = [("modified", "/app/a"), ("deleted", "/app/b"), ("added", "/app/c"), ("deleted", "/app/d"), ("added", "/app/e")]
    assert merge(earlier, later) == [
        ("added", "/app/a"), ("deleted", "/app/b"), ("modified", "/app/c"), ("added", "/app/e"),
    ]  # fmt: skip


def test_the_helper_knows_the_daemon_these_tests_use() -> None:
    if os.environ[HOST_ENV] != daemon.HOST:
        pytest.skip(f"{HOST_ENV} names another daemon")
    assert daemon.running() and daemon.status()["running"] is True
    assert not daemon.running(Path(tempfile.gettempdir()) / "no-daemon-here.sock")


@pytest.mark.slow
def test_bench_reports_every_figure() -> None:
    from legorl_docker import bench

    figures = bench.main(["--trials", "1"])
    names = ("container_start", "exec_true", "seal", "to_verify", "stop", "trial_docker", "trial_local")
    expected = {"trials", "daemon", "image_build_s", "image_cached_ms", "trial_overhead_p50_ms"}
    expected |= {f"{n}_{p}_ms" for n in names for p in ("p50", "p99")}
    assert set(figures) == expected
    assert all(isinstance(v, int | float) for k, v in figures.items() if k != "daemon")
