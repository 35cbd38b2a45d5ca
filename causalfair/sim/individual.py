"""Vectorised individual-level lending simulator (lending.md section A).

Each individual is one row of an array; a step of n individuals is a handful of numpy
operations, whatever n is. The random numbers of a step are drawn separately
(:meth:`LendingSimulator.draw_noise`), so forks share them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from causalfair.policy import Observation
from causalfair.sim.base import StepResult
from causalfair.sim.lending import LendingModel, lending_potential

__all__ = ["LendingSimulator", "LendingState", "LendingNoise"]


@dataclass(frozen=True)
class LendingState:
    level: np.ndarray  # int (n,), 0-based
    group: np.ndarray  # int (n,)
    t: int = 0


@dataclass(frozen=True)
class LendingNoise:
    repay: np.ndarray  # uniform (n,): repays iff repay < p_repay[s, x]
    drift: np.ndarray  # uniform (n,): drift from the group's drift CDF


class LendingSimulator:
    """Individual-level lending dynamics for a batch, matching ``model.tabular`` exactly
    in distribution."""

    def __init__(self, model: LendingModel):
        self.model = model
        self.n_groups = model.n_groups
        self.n_levels = model.n_levels
        self._f = lending_potential(model.n_levels)
        self._init_cdf = np.cumsum(model.initial, axis=1)
        self._drift_cdf = np.cumsum(model.drift, axis=1)

    def reset(self, n: int, group: int | np.ndarray, rng: np.random.Generator) -> LendingState:
        g = np.broadcast_to(np.asarray(group, dtype=np.int64), (n,)).copy()
        u = rng.random(n)
        level = (u[:, None] >= self._init_cdf[g]).sum(axis=1)
        return LendingState(level=np.minimum(level, self.n_levels - 1), group=g, t=0)

    def observe(self, state: LendingState) -> Observation:
        return Observation(group=state.group, level=state.level, t=state.t,
                           extras={"p_repay": self.model.p_repay[state.group, state.level]})

    def draw_noise(self, n: int, rng: np.random.Generator) -> LendingNoise:
        u = rng.random((2, n))
        return LendingNoise(repay=u[0], drift=u[1])

    def step(self, state: LendingState, decisions: np.ndarray, noise: LendingNoise) -> StepResult:
        x, g = state.level, state.group
        d = np.asarray(decisions).astype(bool)
        repay = noise.repay < self.model.p_repay[g, x]
        drift = (noise.drift[:, None] >= self._drift_cdf[g]).sum(axis=1) - 1
        drift = np.minimum(drift, 1)
        step = np.where(d, np.where(repay, 1, -1), 0)
        nxt = np.clip(x + drift + step, 0, self.n_levels - 1)
        reward = np.where(d, np.where(repay, self.model.interest, -1.0), 0.0)
        gain = self._f[nxt] - self._f[x]
        return StepResult(
            state=LendingState(level=nxt, group=g, t=state.t + 1),
            reward=reward,
            gain=gain,
            info={"repay": repay, "drift": drift},
        )
