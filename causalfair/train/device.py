"""Training on a device (``train(..., device=...)``, ``causalfair train --device``): the
arrays of a rollout cross to the device once, and a GPU run repeats bit for bit.

The names a device is given by (cpu, cuda, cuda:N, auto) are resolved by
:func:`causalfair.backends.resolve_device`, the one resolver every door calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = ["device_determinism", "to_device"]


def to_device(a: np.ndarray, device: Any) -> Any:
    """A rollout array as a torch tensor on ``device`` (a ``torch.device``): shared with
    numpy on the CPU (no copy), else copied once through pinned host memory (an
    asynchronous host-to-device copy)."""
    import torch

    t = torch.from_numpy(np.ascontiguousarray(a))
    if device.type == "cpu":
        return t
    return t.pin_memory().to(device, non_blocking=True)


@contextmanager
def device_determinism(device: Any) -> Iterator[None]:
    """Training on a GPU repeats bit for bit: torch's deterministic algorithms (the
    backward of a gather or an index sums without atomics) while the block runs, the
    previous mode restored afterwards; cuBLAS's fixed workspace (``CUBLAS_WORKSPACE_CONFIG``)
    is set when the device is resolved (:func:`causalfair.backends.resolve_device`), before
    any product. On the CPU it changes nothing (torch is not imported)."""
    if not str(device).startswith("cuda"):
        yield
        return
    import torch

    was = torch.are_deterministic_algorithms_enabled()
    warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was, warn_only=warn)
