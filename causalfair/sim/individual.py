"""Vectorised individual-level simulators, re-exported from where they live:
:class:`LendingSimulator` with the lending model (:mod:`causalfair.sim.lending`, whose
comments explain what makes a step cheap) and :class:`TabularSimulator` for any tabular
model (:mod:`causalfair.sim.tabular`).
"""

from causalfair.sim.lending import LendingModel, LendingNoise, LendingSimulator, LendingState
from causalfair.sim.tabular import LazyArrays, TabularSimulator

__all__ = ["LendingSimulator", "LendingState", "LendingNoise", "LazyArrays", "TabularSimulator",
           "LendingModel"]
