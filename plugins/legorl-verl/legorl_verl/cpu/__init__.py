"""verl on a CPU: a platform, a training engine key, a rollout (replica, server, adapter)
backed by the embedded transformers inference, all registered through verl's registries.

Every verl process imports :mod:`legorl_verl.cpu.register` first (``VERL_USE_EXTERNAL_MODULES``,
set by the trainer plugin for the Ray workers it starts); nothing of verl is patched.
"""

ROLLOUT = "legorl-cpu"
"""verl rollout name (``actor_rollout_ref.rollout.name``) of the CPU rollout."""
PLATFORM = "legorl-cpu"
"""verl platform name (``VERL_PLATFORM``) of the CPU platform."""
