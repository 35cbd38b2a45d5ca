"""The DPE in Proposition-1 form by forks (BenefitResult.dpe_prop1, method.md section 3:
sum_t E[pi(d1 | x_t, s) Delta(x_t, s)]) on a system whose policy and benefit vary together
within a cell: the mean of each visit's pi x Delta, not the product of the cell means.

Every unit has a fixed feature z, uniform on [0, 1] in group a and on [0, 1/2] in group b,
and sits at one level. d1 gains z, d0 nothing (Delta = z); the policy approves with
probability z. Per step E[pi Delta] = E[z^2]: 1/3 for a, 1/12 for b, so over T = 2 steps
DPE = 2 (1/3 - 1/12) = 1/2. The cells are the levels (one visited), whose means give
2 ((1/2)^2 - (1/4)^2) = 3/8: what the forks reported before.
"""

from __future__ import annotations

import numpy as np

import causalfair as cf


class _Feature:
    n_groups = 2
    n_levels = 2
    feature_names = ("z",)
    horizon = 2

    def reset(self, n, group, rng):
        top = np.where(np.asarray(group) == 0, 1.0, 0.5)
        return {"z": rng.random(n) * top, "g": np.broadcast_to(np.asarray(group), (n,)).copy()}

    def observe(self, state):
        n = len(state["z"])
        return cf.Observation(group=state["g"], level=np.zeros(n, dtype=int),
                              features=state["z"][:, None])

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, state, decisions, noise):
        d = np.asarray(decisions).astype(float)
        return cf.StepResult(state=state, reward=np.zeros(len(d)), gain=d * state["z"])


def _policy(obs):
    return np.asarray(obs.features)[:, 0]


def test_forks_dpe_is_the_mean_of_each_visits_products():
    system = cf.as_system(_Feature())
    ben = cf.benefit_fairness(system, _policy, 2, n=20_000, seed=0)
    assert ben.method == "mc" and ben.cells == "levels"
    assert abs(ben.dpe_prop1 - 0.5) < 0.02  # sd about 0.004; the cells' means gave 0.375
    dec = cf.decompose(system, _policy, 2, n=20_000, seed=0)
    assert abs(dec.DPE - 0.5) < 4 * dec.se["DPE"]
    assert dec.benefit is not None and dec.benefit.dpe_prop1 == ben.dpe_prop1
