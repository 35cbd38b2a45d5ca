"""Individual-level lending simulator (causalfair.systems.lending.settings, causalfair.systems.tabular_sim) against the tabular
kernel it must match in distribution, plus the protocol properties forks rely on."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from causalfair.engines.montecarlo import check_simulator
from causalfair.systems.lending.settings import (
    SETTINGS,
    LendingNoise,
    LendingSimulator,
    LendingState,
    lending_potential,
    lending_setting,
)
from causalfair.systems.tabular_sim import TabularSimulator

N = 200_000


def _chi2_pvalue(next_levels: np.ndarray, probs: np.ndarray) -> float:
    K = probs.shape[0]
    counts = np.bincount(next_levels, minlength=K)
    support = probs > 0
    assert counts[~support].sum() == 0, (counts, probs)  # impossible levels never occur
    if support.sum() == 1:
        return 1.0
    return float(stats.chisquare(counts[support], N * probs[support] / probs[support].sum()).pvalue)


@pytest.mark.parametrize("setting", SETTINGS)
def test_transition_frequencies_match_kernel(setting):
    """For every (group, decision, level): next-level frequencies of N individuals vs
    model.tabular.kernel (chi-square; 28 tests per setting, each must have p > 1e-4),
    and the per-individual gain and reward are f(x') - f(x) and the section-A reward."""
    lm = lending_setting(setting)
    sim = LendingSimulator(lm)
    kernel = lm.tabular.kernel
    f = lending_potential(lm.n_levels)
    rng = np.random.default_rng(11)
    pvals = []
    for g in range(2):
        for d in (0, 1):
            for x in range(lm.n_levels):
                state = LendingState(level=np.full(N, x, dtype=np.intp),
                                     group=np.full(N, g, dtype=np.intp), group_id=g)
                res = sim.step(state, np.full(N, d, dtype=bool), sim.draw_noise(N, rng))
                nxt = res.state.level
                pvals.append(_chi2_pvalue(nxt, kernel[g, d, x]))
                np.testing.assert_allclose(res.gain, f[nxt] - f[x])
                repay = res.info["repay"]
                want = np.where(repay, lm.interest, -1.0) if d else np.zeros(N)
                np.testing.assert_array_equal(res.reward, want)
                # repayment frequency matches p_repay (binomial z-test)
                p = lm.p_repay[g, x]
                z = (repay.mean() - p) / np.sqrt(max(p * (1 - p), 1e-12) / N)
                assert abs(z) < 5, (g, d, x, repay.mean(), p)
    assert min(pvals) > 1e-4, min(pvals)
    # p-values are roughly uniform: not all large either (catches a too-regular sampler)
    assert np.mean(np.array(pvals) < 0.5) > 0.2


@pytest.mark.parametrize("setting", SETTINGS)
def test_reset_matches_initial_distribution(setting):
    lm = lending_setting(setting)
    sim = LendingSimulator(lm)
    for g in range(2):
        st = sim.reset(N, g, np.random.default_rng(g))
        assert st.level.dtype == np.intp and (st.group == g).all() and st.group_id == g
        assert _chi2_pvalue(st.level, lm.initial[g]) > 1e-4
    # mixed-group batch
    groups = np.arange(N) % 2
    st = sim.reset(N, groups, np.random.default_rng(3))
    assert st.group_id is None
    for g in range(2):
        counts = np.bincount(st.level[groups == g], minlength=lm.n_levels)
        exp = lm.initial[g] * (groups == g).sum()
        assert np.all(np.abs(counts - exp) < 6 * np.sqrt(exp + 1))


def test_mixed_group_batch_equals_per_group_fast_path():
    """The per-individual gather path (group array) and the single-group fast path give
    identical results for the same noise, and so do float-uniform noise and the integer
    noise they are derived from."""
    lm = lending_setting("lending-3")
    sim = LendingSimulator(lm)
    rng = np.random.default_rng(0)
    n = 50_000
    for g in range(2):
        st = sim.reset(n, g, rng)
        mixed = LendingState(level=st.level, group=st.group, t=0, group_id=None)
        d = rng.random(n) < 0.5
        noise = sim.draw_noise(n, rng)
        a, b = sim.step(st, d, noise), sim.step(mixed, d, noise)
        np.testing.assert_array_equal(a.state.level, b.state.level)
        np.testing.assert_array_equal(a.gain, b.gain)
        np.testing.assert_array_equal(a.reward, b.reward)
        # float uniforms: u = k / 2**32 reproduces the integer thresholds exactly
        fl = LendingNoise(repay=noise.repay / 2.0**32, drift=noise.drift / 2.0**32)
        c = sim.step(st, d, fl)
        c_mixed = sim.step(mixed, d, LendingNoise(repay=fl.repay, drift=fl.drift))
        np.testing.assert_array_equal(c.state.level, c_mixed.state.level)
        np.testing.assert_array_equal(c.reward, c_mixed.reward)
        same = np.mean(c.state.level == a.state.level)
        assert same > 0.9999  # differ only where u falls within 2**-32 of a threshold


def test_fork_shares_noise_and_leaves_state_unchanged():
    """A fork (same state and noise, all d0) moves by drift only; the state is untouched."""
    lm = lending_setting("lending-1")
    sim = LendingSimulator(lm)
    rng = np.random.default_rng(1)
    n = 10_000
    st = sim.reset(n, 0, rng)
    before = st.level.copy()
    noise = sim.draw_noise(n, rng)
    d1 = sim.step(st, np.ones(n, dtype=bool), noise)
    d0 = sim.step(st, np.zeros(n, dtype=bool), noise)
    np.testing.assert_array_equal(st.level, before)
    drift = d0.info["drift"]
    np.testing.assert_array_equal(drift, d1.info["drift"])
    np.testing.assert_array_equal(d0.state.level, np.clip(before + drift, 0, lm.n_levels - 1))
    step = np.where(d1.info["repay"], 1, -1)
    np.testing.assert_array_equal(d1.state.level, np.clip(before + drift + step, 0, lm.n_levels - 1))
    np.testing.assert_array_equal(d0.info["repay"], d1.info["repay"])
    assert (d0.reward == 0).all()


def test_observation_and_protocol():
    lm = lending_setting("lending-2")
    for sim in (LendingSimulator(lm), TabularSimulator(lm.tabular)):
        check_simulator(sim, n=200, horizon=4)
        st = sim.reset(100, 1, np.random.default_rng(0))
        obs = sim.observe(st)
        assert obs.t == 0 and len(obs) == 100
        np.testing.assert_array_equal(obs.extras["p_repay"], lm.p_repay[1, st.level])
    with pytest.raises(ValueError, match="group"):
        LendingSimulator(lm).reset(10, 5, np.random.default_rng(0))


@pytest.mark.parametrize("setting", SETTINGS)
def test_tabular_simulator_matches_kernel(setting):
    """The generic inverse-CDF simulator of a TabularModel, same chi-square check."""
    lm = lending_setting(setting)
    sim = TabularSimulator(lm.tabular)
    rng = np.random.default_rng(2)
    n = 50_000
    for g in range(2):
        for d in (0, 1):
            x = np.repeat(np.arange(lm.n_levels), n // lm.n_levels)
            st = LendingState(level=x, group=np.full(x.shape[0], g, dtype=np.intp), group_id=g)
            res = sim.step(st, np.full(x.shape[0], d), sim.draw_noise(x.shape[0], rng))
            for k in range(lm.n_levels):
                nxt = res.state.level[x == k]
                probs = lm.tabular.kernel[g, d, k]
                counts = np.bincount(nxt, minlength=lm.n_levels)
                assert counts[probs == 0].sum() == 0
                sup = probs > 0
                if sup.sum() > 1:
                    p = stats.chisquare(counts[sup], nxt.shape[0] * probs[sup]).pvalue
                    assert p > 1e-4
