"""C = DPE + IPE + SPE checked against parts computed independently of the engines.

The engines compute C and its three parts from the same running sums, so ``C == DPE +
IPE + SPE`` on their output holds whatever those sums are. Here each path effect comes
from its own pair of worlds, recomputed with code of this file only (the model's arrays,
no engine function, no ``TabularModel.propagate``):

- V^pi: the state distribution rolled forward under the policy, V = E f(x_T) - E f(x_0);
- V^PS: the same trajectories under the policy, the gain of each step taken as if d0
  (h0 at the visited states, method.md section 3);
- V^pi0: the distribution rolled forward under d0 everywhere.

DPE is the pair (V^pi, V^PS), IPE (V^PS, V^pi0), SPE V^pi0 alone, and C the pair of
groups of V^pi alone; the Monte Carlo engine is checked against the same parts.
"""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.policies.core import parse_policy
from causalfair.policies.grid import policy_table

T = 15


def _roll(kernel: np.ndarray, initial: np.ndarray, p: np.ndarray, T: int) -> list[np.ndarray]:
    """mu_0..mu_T (G, K) under pi(d1 | x, s) = p, written out: mu'[s, y] = sum_x mu[s, x]
    ((1 - p) P(y | x, d0, s) + p P(y | x, d1, s))."""
    mu = [initial.copy()]
    for _ in range(T):
        m = mu[-1]
        nxt = np.zeros_like(m)
        G, K = m.shape
        for s in range(G):
            for x in range(K):
                nxt[s] += m[s, x] * ((1 - p[s, x]) * kernel[s, 0, x] + p[s, x] * kernel[s, 1, x])
        mu.append(nxt)
    return mu


def independent_parts(model: cf.TabularModel, p: np.ndarray, T: int) -> dict[str, np.ndarray]:
    """V^pi, V^PS, V^pi0 per group from their own worlds (module docstring)."""
    f = model.potential
    K0 = model.kernel
    mu_pi = _roll(K0, model.initial, p, T)
    mu_0 = _roll(K0, model.initial, np.zeros_like(p), T)
    h0 = np.einsum("sxy,sy->sx", K0[:, 0], f) - f  # E[f(x') - f(x) | x, d0, s]
    V = (mu_pi[T] * f).sum(1) - (mu_pi[0] * f).sum(1)
    V_ps = sum((mu_pi[t] * h0).sum(1) for t in range(T))
    V_0 = (mu_0[T] * f).sum(1) - (mu_0[0] * f).sum(1)
    return {"V": V, "V_ps": V_ps, "V_0": V_0}


def effects(parts: dict[str, np.ndarray], pair: tuple[int, int]) -> dict[str, float]:
    a, b = pair
    gap = lambda v: float(v[a] - v[b])  # noqa: E731
    return {"C": gap(parts["V"]), "DPE": gap(parts["V"] - parts["V_ps"]),
            "IPE": gap(parts["V_ps"] - parts["V_0"]), "SPE": gap(parts["V_0"])}


def random_model(rng: np.random.Generator, G: int, K: int) -> cf.TabularModel:
    kernel = rng.dirichlet(np.ones(K) * 0.7, size=(G, 2, K))
    return cf.TabularModel(kernel=kernel, initial=rng.dirichlet(np.ones(K), size=G),
                           potential=rng.normal(size=(G, K)), reward=rng.normal(size=(G, 2, K)))


@pytest.mark.parametrize("setting", ["lending-1", "lending-2", "lending-3"])
def test_exact_parts_equal_their_own_worlds_on_the_lending_settings(setting):
    # fails if the engine mixes up a path (e.g. V^PS taken along pi0's trajectories, or
    # IPE = V^PS - V^pi with DPE adjusted so that the sum still equals C)
    model = cf.lending_setting(setting).tabular
    p = np.asarray(policy_table(parse_policy("threshold:0.5", model), model))
    d = cf.decompose(model, p, horizon=T)
    want = effects(independent_parts(model, p, T), d.pair)
    for k, v in want.items():
        assert getattr(d, k) == pytest.approx(v, abs=1e-12), (setting, k)
    # the three parts are all informative here: a swapped pair would show
    assert min(abs(want["DPE"]), abs(want["IPE"]), abs(want["SPE"])) > 1e-4, want


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_parts_equal_their_own_worlds_on_random_models(seed):
    # fails if the engine computes V^PS with h1 instead of h0, or the pi0 world under pi
    rng = np.random.default_rng(seed)
    model = random_model(rng, 2, 6)
    p = rng.random((2, 6))
    d = cf.decompose(model, p, horizon=9)
    want = effects(independent_parts(model, p, 9), d.pair)
    np.testing.assert_allclose([getattr(d, k) for k in want], list(want.values()), atol=1e-12)


def test_monte_carlo_parts_match_the_independent_exact_parts():
    # each Monte Carlo part against its own pair of exact worlds, within 4.5 standard
    # errors: fails if the MC engine's pi^PS fork took d1 (DPE and IPE both move) or if
    # its pi0 world shared the policy's draws in a way that biases SPE
    model = cf.lending_setting("lending-1").tabular
    p = np.asarray(policy_table(parse_policy("threshold:0.5", model), model))
    mc = cf.decompose_mc(model, p, T, n=20_000, seed=3)
    want = effects(independent_parts(model, p, T), mc.pair)
    for k, v in want.items():
        se = mc.se[k]
        assert se > 0, k
        assert abs(getattr(mc, k) - v) <= 4.5 * se, (k, getattr(mc, k), v, se)
