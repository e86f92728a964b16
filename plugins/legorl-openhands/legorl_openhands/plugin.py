"""Entry point of legorl-openhands: registers the ``openhands`` harness."""

from lego_rl import hookimpl
from legorl_openhands.harness import OpenHands
from legorl_openhands.options import OpenHandsOptions


@hookimpl
def legorl_register_harness(register) -> None:
    register("openhands", OpenHands, options=OpenHandsOptions)
