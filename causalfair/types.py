"""What flows between the layers (a leaf module: numpy only): the observation a policy
sees and the result of one simulator step."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causalfair.errors import PolicyError

__all__ = ["Observation", "StepResult", "check_probs"]


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


def check_probs(p: Any, n: int, where: str) -> np.ndarray:
    """``p`` as a float64 array of ``n`` probabilities, or PolicyError naming ``where``."""
    try:
        arr = np.asarray(p, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise PolicyError(f"{where}: returned {type(p).__name__} {str(p)[:40]!r}, not numbers; "
                          f"return one P(d1) per observation, an array of shape ({n},).") from None
    if arr.shape[0] != n:
        raise PolicyError(f"{where}: returned {arr.shape[0]} probabilities for {n} observations; "
                          f"return one P(d1) per observation, an array of shape ({n},) (a "
                          "constant: np.full(len(obs), p)).")
    if not np.isfinite(arr).all():
        raise PolicyError(f"{where}: returned NaN or inf probabilities.")
    if (arr < 0).any() or (arr > 1).any():
        bad = arr[(arr < 0) | (arr > 1)][0]
        raise PolicyError(
            f"{where}: returned a value outside [0, 1] ({bad:.6g}); a policy must return "
            "P(d1), e.g. apply a sigmoid to logits."
        )
    return arr
