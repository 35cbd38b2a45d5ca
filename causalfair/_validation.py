"""Small argument checks shared by the engines (a leaf module: numpy only)."""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair.errors import InputError, ModelError

__all__ = ["check_horizon", "z_quantile"]


def check_horizon(horizon: Any) -> int:
    """The horizon T as an int >= 1, or ModelError naming the bad value."""
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise ModelError(f"horizon: must be an integer >= 1, got {repr(horizon)[:80]}.")
    return int(horizon)


def z_quantile(alpha: float) -> float:
    """The two-sided normal quantile z_{1 - alpha/2}."""
    from statistics import NormalDist

    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha: must be in (0, 1), got {alpha!r}.")
    return NormalDist().inv_cdf(1.0 - alpha / 2.0)
