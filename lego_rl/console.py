"""The Rich consoles that commands and the run engine print through.

Written to a terminal, a console fits tables to the terminal's width and leaves long lines to
the terminal. Written to a file or a pipe (a log, ``| tee``, a test's captured output), nothing
is wrapped or cropped: Rich would otherwise break lines at 80 columns, inside a path or
between the fields of a step line, and a reader (or ``grep``) would find them cut in two.
"""

from __future__ import annotations

import sys
from typing import TextIO

from rich.console import Console

UNWRAPPED_WIDTH = 100_000
"""The width a console has when it does not write to a terminal: wider than any line we print,
so tables size to their content. (Long text lines are never wrapped anyway: ``soft_wrap``.)"""


def make_console(*, stderr: bool = False) -> Console:
    """A console on stdout (``stderr``: on stderr), unwrapped unless that stream is a terminal
    when the console is made. Markup is read; values are never highlighted."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if _is_tty(stream) else UNWRAPPED_WIDTH
    return Console(stderr=stderr, soft_wrap=True, highlight=False, width=width)


def _is_tty(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # a stand-in without isatty, or a closed stream
        return False
