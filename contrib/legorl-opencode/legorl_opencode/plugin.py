"""Entry point of legorl-opencode: registers the ``opencode`` harness."""

from lego_rl import hookimpl
from legorl_opencode.harness import OpenCode
from legorl_opencode.options import OpenCodeOptions


@hookimpl
def legorl_register_harness(register) -> None:
    register("opencode", OpenCode, options=OpenCodeOptions)
