"""Entry point of legorl-embedded: each kind's registration lives beside its implementation."""

from legorl_embedded.grpo import legorl_register_optimizer
from legorl_embedded.inference import legorl_register_inference
from legorl_embedded.trainer import legorl_register_trainer

__all__ = ["legorl_register_inference", "legorl_register_optimizer", "legorl_register_trainer"]
