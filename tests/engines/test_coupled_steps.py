"""Coupled units whose worlds differ in group composition: the per-step curves
(``Decomposition.steps``, ``steps_frame()``, the report's per-step figure) are each step's
share of V, V^PS and V^pi0, the mean over worlds of each group's mean gain in the world,
so they sum over the steps to those values. They divided the step's gain sums by n times
the first world's units per group: 0.725 and 1.55 per step here where every unit gains 1."""

from __future__ import annotations

import numpy as np

import causalfair as cf


class _Mixed:
    """Worlds of 3 units: one of group a, one of b, the third of a or b at random. Every
    unit gains 1 + its action per step."""

    n_groups = 2
    units_per_replica = 3

    def reset(self, n, group, rng):
        g = np.zeros((n, 3), dtype=int)
        g[:, 1] = 1
        g[:, 2] = rng.integers(0, 2, n)
        return (g.reshape(-1), 0)

    def observe(self, s):
        g, t = s
        return cf.Observation(group=g.copy(), t=t)

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, s, d, noise):
        g, t = s
        d = np.asarray(d, dtype=float)
        return cf.StepResult(state=(g, t + 1), reward=np.zeros(len(d)), gain=1.0 + d)


class _Half:
    name = "half"

    def action_probs(self, obs):
        return np.tile([0.5, 0.5], (len(obs.group), 1))


def test_steps_are_the_per_world_means_of_each_step():
    system = cf.System(id="mixed", groups=("a", "b"), simulator=_Mixed, units_per_replica=3,
                       horizon=3)
    dec = cf.decompose(system, _Half(), 3, n=400, seed=0)
    assert dec.group_units_per_world is None  # the worlds differ
    np.testing.assert_allclose(dec.steps[1:], 1.0, rtol=0, atol=1e-12)  # pi^PS, pi0: 1 a step
    for i, v in enumerate((dec.V, dec.V_ps, dec.V_0)):
        np.testing.assert_allclose(dec.steps[i].sum(-1), v, rtol=1e-12)
    frame = dec.steps_frame()
    assert np.allclose(frame["pi0"], 1.0)
