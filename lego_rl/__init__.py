"""lego-rl: reinforcement learning of coding agents on their native, unmodified harnesses."""

from lego_rl.hookspecs import hookimpl

__all__ = ["hookimpl"]
__version__ = "0.1.0"
