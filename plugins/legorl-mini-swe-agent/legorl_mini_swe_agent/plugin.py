"""Entry point of legorl-mini-swe-agent: registers the ``mini-swe-agent`` harness."""

from lego_rl import hookimpl
from legorl_mini_swe_agent.harness import MiniSweAgent
from legorl_mini_swe_agent.options import MiniSweAgentOptions


@hookimpl
def legorl_register_harness(register) -> None:
    register("mini-swe-agent", MiniSweAgent, options=MiniSweAgentOptions)
