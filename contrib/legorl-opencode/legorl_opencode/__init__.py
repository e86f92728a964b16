"""lego-rl harness plugin: the unmodified OpenCode CLI, speaking the OpenAI chat completions API."""

from legorl_opencode.harness import OpenCode
from legorl_opencode.options import OpenCodeOptions

__all__ = ["OpenCode", "OpenCodeOptions"]
