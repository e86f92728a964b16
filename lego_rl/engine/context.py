"""Where :class:`~lego_rl.kinds.RunContext` used to live; it is part of the plugin API now
(:mod:`lego_rl.kinds`), so that ``kinds`` and the engine import each other no more."""

from lego_rl.kinds import EngineExtras, Group, RunContext

__all__ = ["EngineExtras", "Group", "RunContext"]
