"""What a container sandbox runs inside every task image, and a missing one named from the
container engine's own error.

A container sandbox runs its commands as ``bash -c`` and its container init (the proxy relay,
the reaper, the limit counters) on the image's ``python3``. An image without them fails at the
engine's first exec with an error about an executable; :func:`lacking` turns that error into
what the task's image must add, so the trial ends ``sandbox_error`` with a reason a task
author can act on.
"""

from __future__ import annotations

import re

NEEDS = {
    "python3": "python3 on PATH (the sandbox's init and command wrapper are Python scripts run by the image's python3)",
    "bash": "bash on PATH in the task image (every command of a trial runs as bash -c)",
    "sh": "sh on PATH in the task image (every command of a trial runs through a shell)",
}
_NOT_FOUND = re.compile(
    r'exec: "?(python3|bash|sh)"?: executable file not found'
    r'|(?:^|[\s/"])(python3|bash|sh): (?:no such file|not found)',
    re.IGNORECASE | re.MULTILINE,
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def lacking(error: str) -> str | None:
    """What the image lacks, read from an engine's error or a failed build's log (None: the
    error is about something else)."""
    found = _NOT_FOUND.search(_ANSI.sub("", error))
    if found is None:
        return None
    return NEEDS[(found[1] or found[2]).lower()]


def message(backend: str, task: str, what: str) -> str:
    """The reason of a trial whose task image lacks ``what`` (see :func:`lacking`)."""
    return f"the image of task {task} lacks what the {backend} sandbox runs inside: {what}"
