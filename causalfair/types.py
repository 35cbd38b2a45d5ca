"""What flows between the layers (a leaf module: numpy only): the observation a policy
sees and the result of one simulator step."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Observation", "StepResult"]


@dataclass(frozen=True)
class Observation:
    """A batch of observations of ``n`` individuals.

    ``level``: int array (n,) of 0-based levels, or None for simulators without levels.
    ``group``: int array (n,) of group indices.
    ``features``: float array (n, F) or None (continuous simulators).
    ``t``: the decision epoch, or None when the policy is evaluated for all epochs.
    ``extras``: further named arrays (n, ...) a simulator exposes (history, etc.).
    """

    group: np.ndarray
    level: np.ndarray | None = None
    features: np.ndarray | None = None
    t: int | None = None
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(np.shape(self.group)[0])


@dataclass(frozen=True)
class StepResult:
    """What one step returns for a batch of n individuals."""

    state: Any
    reward: np.ndarray  # (n,)
    gain: np.ndarray  # (n,)
    info: Mapping[str, np.ndarray] = field(default_factory=dict)


