"""Entry point of legorl-harbor."""

from legorl_harbor.backend import legorl_register_sandbox

__all__ = ["legorl_register_sandbox"]
