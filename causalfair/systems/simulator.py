"""The simulator protocol the Monte Carlo engine and the trainers use.

A simulator steps a *batch* of individuals with array operations. Randomness is split
from dynamics: ``draw_noise`` draws the random numbers of one step and ``step`` is a
deterministic function of (state, decisions, noise). That is what makes a *fork*
possible: call ``step`` twice with the same state and noise and different decisions
(common random numbers between pi, pi^PS and pi0).

Wrapping your own simulator takes four methods::

    class MySim:
        n_groups = 2
        def reset(self, n, group, rng):            # -> state (any object)
            ...
        def observe(self, state):                  # -> causalfair.policies.core.Observation
            ...
        def draw_noise(self, n, rng):              # -> noise (any object, n rows)
            ...
        def step(self, state, decisions, noise):   # -> StepResult
            ...

``group`` is an int array (n,) (or one int for the whole batch). ``StepResult.gain`` is
the qualification gain g^s(x_t, x_{t+1}) of each individual; ``reward`` the decision
maker's reward; ``info`` any ground truth (e.g. the would-repay outcome).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from causalfair.types import Observation, StepResult

__all__ = ["Simulator", "StepResult"]


@runtime_checkable
class Simulator(Protocol):
    n_groups: int

    def reset(self, n: int, group: int | np.ndarray, rng: np.random.Generator) -> Any: ...

    def observe(self, state: Any) -> Observation: ...

    def draw_noise(self, n: int, rng: np.random.Generator) -> Any: ...

    def step(self, state: Any, decisions: np.ndarray, noise: Any) -> StepResult: ...
