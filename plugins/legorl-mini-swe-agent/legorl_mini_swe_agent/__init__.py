"""lego-rl harness plugin: the unmodified mini-swe-agent CLI, speaking OpenAI chat completions."""

from legorl_mini_swe_agent.harness import MiniSweAgent
from legorl_mini_swe_agent.options import MiniSweAgentOptions

__all__ = ["MiniSweAgent", "MiniSweAgentOptions"]
