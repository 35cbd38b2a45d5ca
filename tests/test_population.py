"""Seed 002's algorithms on replicator-1 (issue 14): the continuous-threshold population
MDP against the system's own simulator, the reference and metrics by hand, the myopic
baselines, the audit of a population agent, and short seeded runs of R-TD3 and L-UCBFair."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

import causalfair as cf
from causalfair.errors import ConfigError
from causalfair.train import population as P


@pytest.fixture(scope="module")
def system():
    return cf.systems.make("replicator-1", horizon=6)


def test_the_population_mdp_is_the_systems_simulator(system):
    env = P.PopulationEnv(system)
    sim = system.make_simulator()
    rng = np.random.default_rng(0)
    q = rng.uniform(0.05, 0.95, size=(7, 2))
    k = rng.integers(0, len(env.grid), size=(7, 2))
    q2, r, D = env.step(q, env.grid[k])
    s = sim.reset(7, None, rng)
    s.q[:] = q.reshape(-1)
    res = sim.step(s, k.reshape(-1), sim.draw_noise(14, rng))
    np.testing.assert_allclose(q2.reshape(-1), res.state.q, rtol=0, atol=1e-15)
    np.testing.assert_allclose(r, (res.reward.reshape(7, 2) * env.w).sum(1), atol=1e-15)
    # demographic parity by hand: xi_g = q TPR + (1 - q) FPR, X ~ N(+-1, 1)
    a = env.grid[k]
    xi = q * (1 - norm.cdf(a - 1)) + (1 - q) * (1 - norm.cdf(a + 1))
    np.testing.assert_allclose(D, 0.5 * (xi[:, 0] - xi[:, 1]) ** 2, atol=1e-12)


def test_regret_and_violation_by_hand():
    reg, drtn = P.regret_and_violation([1.0, 2.0, 3.0], [4.0, 6.0, 5.5], V_star=3.0, c=5.0)
    np.testing.assert_allclose(reg, [2.0, 3.0, 3.0])
    np.testing.assert_allclose(drtn, [1.0, 0.0, 0.0])  # max(0, 1), max(0, 1 - 1), max(0, -0.5)


def test_best_constant_is_the_best_feasible_pair(system):
    env = P.PopulationEnv(system)
    starts = np.array([[0.3, 0.7], [0.8, 0.2]])
    c = 5.9
    ref = P.best_constant(env, c, starts)
    for i, s0 in enumerate(starts):  # every pair rolled one at a time
        best = -np.inf
        for x in env.grid:
            for y in env.grid:
                agent = P.PopulationAgent("c", lambda q, t, x=x, y=y: np.tile([x, y], (len(q), 1)))
                v = P.episode_values(env, agent, s0)
                if v["V_g"][0] >= c:
                    best = max(best, v["V_r"][0])
        assert ref["V_r"][i] == pytest.approx(best, abs=1e-12)
    with pytest.raises(ConfigError, match="no constant threshold pair meets V_g >= 7"):
        P.best_constant(env, 7.0, starts)


def test_myopic_baselines(system):
    env = P.PopulationEnv(system)
    q = np.array([[0.3, 0.7]])
    # task "tp" (alpha 1, beta 0): r = sum_g w_g q_g TPR(a_g) falls with every threshold
    np.testing.assert_array_equal(P.myopic(env).act(q, 0), [[0.0, 0.0]])
    # lam -> 1 (disparity only): the chosen pair equalises acceptance as well as the grid can
    a = P.myopic(env, lam=0.999).act(q, 0)
    _, _, D = env.step(q, a)
    assert D[0] < 1e-4
    with pytest.raises(ConfigError, match="lam: must be in"):
        P.myopic(env, lam=1.0)


def test_an_agent_audits_on_the_system(system):
    env = P.PopulationEnv(system)
    agent = P.PopulationAgent("const", lambda q, t: np.tile([0.31, 0.68], (len(q), 1)))
    d = cf.decompose_mc(system, P.audit_policy(env, agent), n=2, seed=0)
    snapped = P.PopulationAgent("snap", lambda q, t: np.tile([0.3, 0.7], (len(q), 1)))
    v = P.episode_values(env, snapped)
    assert d.total_utility == pytest.approx(v["V_r"][0], abs=1e-12)
    assert d.C == pytest.approx(d.DPE + d.IPE + d.SPE, abs=1e-12)
    with pytest.raises(ConfigError, match="replicator-1"):
        P.PopulationEnv(cf.systems.make("attention-1"))


def test_rtd3_and_lucbfair_run_seeded(system):
    env = P.PopulationEnv(system)
    c = P.RTD3Config(steps=480, envs=4, learning_starts=48, hidden=(16, 16), batch=32)
    a, b = P.train_rtd3(system, c), P.train_rtd3(system, c)
    assert len(a.history) == 480 // 6 and a.history == b.history
    q = np.random.default_rng(0).uniform(0.1, 0.9, (5, 2))
    out = a.act(q, 3)
    assert out.shape == (5, 2) and ((0 <= out) & (out <= 1)).all()
    np.testing.assert_array_equal(out, b.act(q, 3))
    lc = P.LUCBFairConfig(episodes=12, phi_samples=2000, phi_epochs=2, d=6)
    u, v = P.train_lucbfair(system, lc), P.train_lucbfair(system, lc)
    assert len(u.history) == 12 and u.history == v.history
    assert all(0.0 <= h["nu"] <= lc.chi for h in u.history)
    loci = np.arange(0.1, 1.0, 0.2)
    acts = u.act(q, 0)
    assert np.isin(np.round(acts, 10), np.round(loci, 10)).all()  # a locus of the 5 x 5 grid
    assert P.episode_values(env, u)["V_r"].shape == (1,)


def test_bad_configs_name_the_field():
    with pytest.raises(ConfigError, match="steps: bad value 0"):
        P.RTD3Config(steps=0)
    with pytest.raises(ConfigError, match="lr: bad value -1"):
        P.RTD3Config(lr=-1)
    with pytest.raises(ConfigError, match="chi: bad value -1"):
        P.LUCBFairConfig(chi=-1)
    assert P.LUCBFairConfig(chi=0).chi == 0  # the supplementary code's setting
    with pytest.raises(ConfigError, match="episodes: bad value 1000000"):
        P.LUCBFairConfig(episodes=1_000_000)
