"""lego-rl harness plugin: the unmodified Claude Code CLI, speaking the Anthropic messages API."""

from legorl_claude_code.harness import ClaudeCode
from legorl_claude_code.options import ClaudeCodeOptions

__all__ = ["ClaudeCode", "ClaudeCodeOptions"]
