"""Scripts that run inside a trial's container (python3 of the image, standard library only):
``init.py`` (legorl-std's :mod:`legorl_std.sandbox.container_init`) is its PID 1, ``exec.py``
wraps every command. The host writes them into the container's root-only ``/run/legorl`` (a
bind of a per-container host dir)."""

from pathlib import Path

from legorl_std.sandbox.netforward import CONTAINER_INIT

INIT = CONTAINER_INIT
EXEC = Path(__file__).with_name("exec.py")
