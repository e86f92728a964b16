"""Entry point of legorl-claude-code: registers the ``claude-code`` harness."""

from lego_rl import hookimpl
from legorl_claude_code.harness import ClaudeCode
from legorl_claude_code.options import ClaudeCodeOptions


@hookimpl
def legorl_register_harness(register) -> None:
    register("claude-code", ClaudeCode, options=ClaudeCodeOptions)
