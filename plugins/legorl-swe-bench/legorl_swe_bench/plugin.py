"""Entry point of legorl-swe-bench."""

from legorl_swe_bench.tasks import legorl_register_tasks
from legorl_swe_bench.verifier import legorl_register_verifier

__all__ = ["legorl_register_tasks", "legorl_register_verifier"]
