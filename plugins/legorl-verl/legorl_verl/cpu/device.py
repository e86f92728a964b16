"""The ``torch.<device>`` namespace verl calls on its platform's device module, for the CPU.

verl asks its device module for memory statistics, caches, seeds and streams as on CUDA;
on a CPU there is nothing to free and no device memory to report (0), one device, ``cpu``.
What is not defined here comes from :mod:`torch.cpu`.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.cpu


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def current_device() -> str:
    """verl moves tensors with ``.to(current_device())``: on a CPU that is ``cpu``."""
    return "cpu"


def get_device_name(device: Any = None) -> str:
    return "CPU"


def set_device(device: Any) -> None:
    return None


def synchronize(device: Any = None) -> None:
    return None


def empty_cache() -> None:
    return None


def memory_allocated(device: Any = None) -> int:
    return 0


def memory_reserved(device: Any = None) -> int:
    return 0


def max_memory_allocated(device: Any = None) -> int:
    return 0


def max_memory_reserved(device: Any = None) -> int:
    return 0


def reset_peak_memory_stats(device: Any = None) -> None:
    return None


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of the machine's memory."""
    page = os.sysconf("SC_PAGE_SIZE")
    return page * os.sysconf("SC_AVPHYS_PAGES"), page * os.sysconf("SC_PHYS_PAGES")


def manual_seed(seed: int) -> None:
    torch.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    torch.manual_seed(seed)


def get_rng_state(device: Any = None) -> torch.Tensor:
    return torch.get_rng_state()


def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
    torch.set_rng_state(state)


def __getattr__(name: str) -> Any:
    return getattr(torch.cpu, name)
