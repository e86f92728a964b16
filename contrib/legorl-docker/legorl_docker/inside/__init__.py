"""Scripts that run inside a trial's container (python3 of the image, standard library only):
``init.py`` is its PID 1, ``exec.py`` wraps every command. The host writes them into the
container's root-only ``/run/legorl`` (a bind of a per-container host dir)."""

from pathlib import Path

INIT = Path(__file__).with_name("init.py")
EXEC = Path(__file__).with_name("exec.py")
