"""Lending settings (lending.md section A)."""

import numpy as np
import pytest

import causalfair as cf
from causalfair.systems.lending.settings import lending_potential


def test_potential_largest_one_level_gain_is_one():
    for K in (3, 7, 20):
        f = lending_potential(K)
        assert np.diff(f).max() == pytest.approx(1.0)
        assert f[0] == pytest.approx(1 / (K**3 - (K - 1) ** 3))


def test_setting1_tables():
    lm = cf.lending_setting("lending-1")
    np.testing.assert_array_equal(lm.initial[0], [0, .1, .1, .2, .3, .3, 0])
    np.testing.assert_array_equal(lm.initial[1], [.1, .1, .2, .3, .3, 0, 0])
    np.testing.assert_array_equal(lm.p_repay[1], [.1, .2, .45, .6, .65, .7, .7])
    np.testing.assert_array_equal(lm.drift, [[.1, .8, .1]] * 2)


def test_setting3_tables():
    lm = cf.lending_setting("lending-3")
    np.testing.assert_allclose(lm.initial, [[.05, .1, .15, .25, .3, .15, 0]] * 2)
    np.testing.assert_array_equal(lm.drift, [[.05, .8, .15], [.15, .8, .05]])


def test_kernel_by_hand_middle_and_edges():
    lm = cf.lending_setting("lending-1")
    ker = lm.tabular.kernel
    # level index 3 (level 4), p_repay = .6, drift (.1, .8, .1)
    # d0: x-1 .1, x .8, x+1 .1
    np.testing.assert_allclose(ker[0, 0, 3], [0, 0, .1, .8, .1, 0, 0])
    # d1: repay (.6) -> +1 + u ; default (.4) -> -1 + u
    exp = np.zeros(7)
    for u, pu in ((-1, .1), (0, .8), (1, .1)):
        exp[3 + u + 1] += .6 * pu
        exp[3 + u - 1] += .4 * pu
    np.testing.assert_allclose(ker[0, 1, 3], exp)
    # bottom level, d1: default keeps the level (clipped), drift down clipped too
    p = .1
    exp0 = np.zeros(7)
    for u, pu in ((-1, .1), (0, .8), (1, .1)):
        exp0[min(max(0 + u + 1, 0), 6)] += p * pu
        exp0[min(max(0 + u - 1, 0), 6)] += (1 - p) * pu
    np.testing.assert_allclose(ker[1, 1, 0], exp0)


def test_reward_table():
    lm = cf.lending_setting("lending-1", interest=0.5)
    r = lm.tabular.reward
    np.testing.assert_allclose(r[:, 0], 0.0)
    np.testing.assert_allclose(r[0, 1], 0.5 * lm.p_repay[0] - (1 - lm.p_repay[0]))


@pytest.mark.parametrize("setting", cf.SETTINGS)
@pytest.mark.parametrize("K", [3, 7, 12])
def test_any_K_gives_a_valid_model(setting, K):
    m = cf.lending_setting(setting, n_levels=K).tabular
    assert m.n_levels == K
    r = cf.decompose(m, cf.parse_policy("threshold:0.5", m), 5)
    assert r.diagnostics_ok


def test_interpolation_for_other_K():
    lm = cf.lending_setting("lending-1", n_levels=13)
    # level k sits at position 6k/12 = k/2 of the 7-level table
    assert lm.p_repay[0, 2] == pytest.approx(0.2)  # position 1
    assert lm.p_repay[0, 3] == pytest.approx((0.2 + 0.45) / 2)  # position 1.5
    np.testing.assert_allclose(lm.initial.sum(1), 1.0)


def test_structure_reflects_group_dependence():
    s1 = cf.lending_setting("lending-1").structure()
    assert s1.exogenous == {"Y": (False, True), "U": (False, False)} and s1.s_to_x0
    s3 = cf.lending_setting("lending-3").structure()
    assert s3.exogenous["U"] == (True, False) and not s3.s_to_x0
    s2 = cf.lending_setting("lending-2").structure()
    assert s2.exogenous["Y"][0] and s2.s_to_x0


def test_bad_setting_and_levels():
    with pytest.raises(cf.ModelError, match="setting: unknown value 'lending-9'; allowed values: lending-1, lending-2, lending-3"):
        cf.lending_setting("lending-9")
    with pytest.raises(cf.ModelError, match="n_levels: must be an integer >= 3, got 2"):
        cf.lending_setting("lending-1", n_levels=2)
