"""Entry point of legorl-codex: registers the ``codex`` harness."""

from lego_rl import hookimpl
from legorl_codex.harness import Codex
from legorl_codex.options import CodexOptions


@hookimpl
def legorl_register_harness(register) -> None:
    register("codex", Codex, options=CodexOptions)
