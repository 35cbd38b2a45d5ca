"""A simulator whose state never varies (one level, gain 0), shared by tests of the
engines at their edges."""

from __future__ import annotations

import numpy as np

import causalfair as cf


class OneLevel:
    """One level, gain 0: Lambda is the gap in the policy's distribution between groups."""

    n_groups, n_levels, horizon = 2, 1, 3

    def reset(self, n, group, rng):
        return np.broadcast_to(np.asarray(group), (n,)).astype(np.int64).copy()

    def observe(self, g):
        return cf.Observation(group=g, level=np.zeros(len(g), dtype=np.int64))

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, g, d, u):
        return cf.StepResult(state=g, reward=np.zeros(len(d)), gain=np.zeros(len(d)))
