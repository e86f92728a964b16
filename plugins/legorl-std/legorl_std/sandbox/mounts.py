"""What a container needs around the harness's read-only mounts."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import PurePosixPath


def traverse_above(targets: Iterable[str]) -> str:
    """Shell lines, run as root, that let another user traverse the image's dirs above mount
    targets (e.g. /root, 0700 in Debian, above a runtime under /root/.pyenv): search
    permission, not listing; a dir the image lacks is skipped."""
    wanted = set(targets)
    above = sorted({str(p) for t in wanted for p in PurePosixPath(t).parents if str(p) != "/"} - wanted)
    return "".join(f"if [ -d {shlex.quote(d)} ]; then chmod o+x {shlex.quote(d)}; fi\n" for d in above)
