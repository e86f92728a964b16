"""lego-rl harness plugin: the unmodified OpenHands CLI (headless), speaking OpenAI chat completions."""

from legorl_openhands.harness import OpenHands
from legorl_openhands.options import OpenHandsOptions

__all__ = ["OpenHands", "OpenHandsOptions"]
