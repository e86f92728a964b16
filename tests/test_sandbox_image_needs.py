"""A task image lacking what a container sandbox runs inside is named from the engine's error."""

from __future__ import annotations

import pytest
from legorl_std.sandbox import image_needs


@pytest.mark.parametrize(
    ("error", "named"),
    [
        (
            "Error response from daemon: failed to create task for container: failed to create shim task: "
            'OCI runtime create failed: runc create failed: unable to start container process: exec: "python3": '
            "executable file not found in $PATH: unknown",
            "python3",
        ),
        (
            'OCI runtime exec failed: exec failed: unable to start container process: exec: "bash": '
            "executable file not found in $PATH: unknown",
            "bash",
        ),
        ("/bin/sh: 1: python3: not found", "python3"),
        ("\x1b[31mbash: no such file or directory\x1b[0m", "bash"),
    ],
)
def test_the_missing_executable_is_named(error: str, named: str) -> None:
    assert image_needs.lacking(error) == image_needs.NEEDS[named]


@pytest.mark.parametrize(
    "error",
    [
        "/bin/sh: 1: make: not found",  # a build step's own tool, not the sandbox's
        "bash: line 1: syntax error near unexpected token",
        "Error response from daemon: No such image: legorl/base:bookworm",
    ],
)
def test_other_errors_are_not_blamed_on_the_image(error: str) -> None:
    assert image_needs.lacking(error) is None


def test_the_message_names_the_task_and_the_backend() -> None:
    assert (
        image_needs.message("harbor", "t1", "x") == "the image of task t1 lacks what the harbor sandbox runs inside: x"
    )
