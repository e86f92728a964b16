"""Host-side bait for the network attacks: the core testing kit's (:mod:`lego_rl.testing.bait`),
which the sandbox contracts use too."""

from lego_rl.testing.bait import Bait, host_address

__all__ = ["Bait", "host_address"]
