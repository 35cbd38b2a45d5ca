"""The attention-allocation systems (issue 14): ml-fairness-gym's dynamics with the
published parameters, the greedy placement of the RL wrappers, IPE = 0 exactly (a site's
gain without attention does not depend on its state), and the Gymnasium environments."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import poisson

import causalfair as cf
from causalfair.systems.attention import (
    ATTENTION_DEFAULTS,
    AttentionSimulator,
    AttentionState,
    allocate,
)


def test_the_published_parameters():
    a, h = ATTENTION_DEFAULTS["attention-1"], ATTENTION_DEFAULTS["attention-harder"]
    assert (a["units"], a["rates"], a["increase"], a["decrease"]) == (
        6, (8.0, 6.0, 4.0, 3.0, 1.5), (0.1,) * 5, (0.1,) * 5)
    assert (h["units"], h["rates"]) == (30, (30.0, 25.0, 22.5, 17.5, 12.5))
    assert h["increase"] == (0.08, 0.2, 0.4, 0.8, 2.0)
    assert h["decrease"] == (0.004, 0.01, 0.016, 0.02, 0.04)
    s = cf.systems.make("attention-1")
    assert s.units_per_replica == 5 and len(s.groups) == 5 and s.decisions.baseline == 0
    assert 0 not in s.decisions.allowed  # "no attention anywhere" breaks the budget


def _greedy(w, units):
    """The wrappers' placement, one row at a time in plain Python."""
    total = sum(w)
    if total <= 0:
        return [0] * len(w)
    share = [x / total for x in w]
    out = [0] * len(w)
    for _ in range(units):
        k = max(range(len(w)), key=lambda i: (share[i], -i))
        out[k] += 1
        share[k] -= 1.0 / units
    return out


def test_greedy_placement():
    assert allocate(np.ones((1, 5)), 6).tolist() == [[2, 1, 1, 1, 1]]
    assert allocate(np.array([[1.0, 0, 0, 0, 0]]), 6).tolist() == [[6, 0, 0, 0, 0]]
    assert allocate(np.zeros((1, 5)), 6).tolist() == [[0] * 5]
    w = np.random.default_rng(0).integers(0, 5, (300, 5)).astype(float)
    got = allocate(w, 30)
    assert got.tolist() == [_greedy(list(r), 30) for r in w]
    assert (got.sum(1)[w.sum(1) > 0] == 30).all()


def test_poisson_incidents_by_inverse_cdf():
    from causalfair.systems.attention import poisson_inverse

    rng = np.random.default_rng(5)
    lam = np.concatenate([rng.uniform(0, 60, 20000), [0.0, 600.0, 1e-9]])
    u = rng.random(lam.shape[0])
    y = poisson_inverse(u, lam)
    ref = np.where(lam > 0, poisson.ppf(u, lam), 0.0)
    assert (y != ref).mean() < 1e-3  # equal but for rounding at a step of the CDF
    assert np.abs(y - ref).max() <= 1
    # monotone in u: the same uniform is the same luck
    v = np.sort(rng.random(1000))
    assert (np.diff(poisson_inverse(v, np.full(1000, 7.5))) >= 0).all()


def test_one_step_equals_a_hand_computation():
    p = ATTENTION_DEFAULTS["attention-harder"]
    sim = AttentionSimulator(p["units"], p["rates"], p["increase"], p["decrease"])
    rng = np.random.default_rng(3)
    for _ in range(20):
        rate = rng.uniform(0, 40, 5)
        rate[rng.integers(5)] = 0.0
        w = rng.integers(0, 4, 5)
        u = rng.random(5)
        s = AttentionState(rate=rate, seen=np.zeros(5), attention=np.zeros(5),
                           group=np.arange(5), t=0)
        res = sim.step(s, w, u)
        a = _greedy(list(w.astype(float)), 30)
        for k in range(5):
            y = poisson.ppf(u[k], rate[k]) if rate[k] > 0 else 0.0  # scipy's quantile
            want = rate[k] + p["increase"][k] if a[k] == 0 else max(
                0.0, rate[k] - p["decrease"][k] * a[k])
            assert res.state.rate[k] == pytest.approx(want, abs=1e-12)
            assert res.reward[k] == min(a[k], y) and res.gain[k] == pytest.approx(rate[k] - want)


class Random:
    """Random priorities, from what the sites showed (a stochastic policy)."""

    name = "random"

    def action_probs(self, obs):
        n = obs.group.shape[0]
        p = np.full((n, 5), 0.25)
        p[:, 0] = 0.0
        return p


@pytest.mark.parametrize("sid", ["attention-1", "attention-harder"])
def test_ipe_is_exactly_zero_and_spe_is_the_drift_gap(sid):
    system = cf.systems.make(sid)
    T = system.horizon
    up = ATTENTION_DEFAULTS[sid]["increase"]
    for pol in (Random(), cf.parse_policy("action:4", system)):
        d = cf.decompose_mc(system, pol, n=300, seed=1)
        a, b = d.pair
        # zero up to rounding: lambda - (lambda + up) is up only to the last bit of lambda
        assert abs(d.IPE) < 1e-12 and d.se["IPE"] < 1e-12
        if isinstance(pol, Random):  # a random policy's C varies; its IPE still does not
            assert d.se["C"] > 1e-3
        assert d.SPE == pytest.approx(-T * (up[a] - up[b]), abs=1e-9)
        assert d.C == pytest.approx(d.DPE + d.SPE, abs=1e-12)
        assert d.V_0 == pytest.approx(-T * np.array(up), abs=1e-9)  # pi0: no attention
        again = cf.decompose_mc(system, pol, n=300, seed=1)
        assert again.estimates() == d.estimates()


def test_gymnasium_environments_pass_both_checkers_and_are_seeded():
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the published Box(-3, 3) actions
        for env_id in ("causalfair/Attention-v0", "causalfair/AttentionHarder-v0"):
            env = gym.make(env_id).unwrapped
            check_env(env, skip_render_check=True)
            sb3_check_env(env, warn=True)
    runs = []
    for seed in (2, 2, 3):
        env = gym.make("causalfair/Attention-v0")
        obs, _ = env.reset(seed=seed)
        traj = [obs.tolist()]
        for t in range(30):
            obs, r, term, trunc, info = env.step(np.linspace(-1, 1, 5) * (t % 3 - 1))
            traj.append(obs.tolist() + info["rates"].tolist())
        runs.append(traj)
    assert runs[0] == runs[1] and runs[0] != runs[2]
