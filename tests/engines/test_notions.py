"""Benefit fairness and the other notions."""

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.notions import other_notions, wasserstein_levels


def test_lambda_brute_force_matches_vectorised():
    m = cf.lending_setting("lending-2").tabular
    pi = cf.parse_policy("random:0.3", m)
    rng = np.random.default_rng(0)
    p = rng.random((2, 7))
    res = cf.benefit_fairness(m, p, 8, eps=0.2, weights="initial")
    delta = m.benefit()
    w = m.initial
    total = 0.0
    for x in range(7):
        for y in range(7):
            total += 0.2 * abs(p[0, x] - p[1, y]) / (0.2 + abs(delta[0, x] - delta[1, y])) * w[0, x] * w[1, y]
    assert res.Lambda == pytest.approx(total, rel=1e-13)
    # a constant policy is perfectly benefit-fair
    assert cf.benefit_fairness(m, pi, 8).Lambda == 0.0


def test_worst_pairs_sorted_and_sum():
    m = cf.lending_setting("lending-1").tabular
    res = cf.benefit_fairness(m, cf.parse_policy("threshold:0.5", m), 20)
    wp = res.worst_pairs(49)
    assert wp["contribution"].is_monotonic_decreasing
    assert wp["contribution"].sum() == pytest.approx(res.Lambda)
    assert wp["share"].sum() == pytest.approx(1.0)
    tab = res.table()
    assert len(tab) == 14 and set(tab.columns) >= {"Delta", "p_d1", "P_x"}


def test_dpe_proposition_form_equals_engine():
    for s in cf.SETTINGS:
        m = cf.lending_setting(s).tabular
        pi = cf.parse_policy("threshold:0.55", m)
        assert cf.benefit_fairness(m, pi, 20).dpe_prop1 == pytest.approx(cf.decompose(m, pi, 20).DPE, abs=1e-13)


def test_visitation_weights_default_and_bad_args():
    m = cf.lending_setting("lending-1").tabular
    p = cf.policy_table(cf.parse_policy("threshold:0.5", m), m)
    res = cf.benefit_fairness(m, p, 5)
    np.testing.assert_allclose(res.state_weights, m.propagate(p, 5)[:5].mean(0))
    with pytest.raises(cf.ModelError, match="eps: must be a number > 0, got 0"):
        cf.benefit_fairness(m, p, 5, eps=0)
    with pytest.raises(cf.ModelError, match="weights: unknown value 'final'"):
        cf.benefit_fairness(m, p, 5, weights="final")


def test_w1_levels():
    assert wasserstein_levels(np.array([1, 0, 0.]), np.array([0, 0, 1.])) == 2.0
    assert wasserstein_levels(np.array([.5, .5, 0]), np.array([0, .5, .5])) == 1.0


def test_other_notions_hand_checks():
    m = cf.lending_setting("lending-1").tabular
    always = other_notions(m, cf.parse_policy("always", m), 10)
    assert always["tpr_gap"] == 0.0 and always["dp_gap"] == 0.0
    assert always["approval_rate"]["s+"] == 1.0
    never = other_notions(m, cf.parse_policy("never", m), 10)
    assert never["utility"] == 0.0 and never["tpr"]["s-"] == 0.0
    # threshold at level >= 4 (index 3): TPR = share of would-repay mass at approved levels
    thr = other_notions(m, cf.parse_policy("threshold:0.5", m), 1)
    q = m.aux["p_repay"][0]
    init = m.initial
    tpr0 = (init[0] * q)[3:].sum() / (init[0] * q).sum()
    tpr1 = (init[1] * q)[3:].sum() / (init[1] * q).sum()
    assert thr["tpr"]["s+"] == pytest.approx(tpr0) and thr["tpr_gap"] == pytest.approx(abs(tpr0 - tpr1))
    assert thr["elbert_bias"] == pytest.approx(thr["tpr_gap"])
    r = cf.decompose(m, cf.parse_policy("threshold:0.5", m), 1)
    assert thr["utility"] == pytest.approx(r.total_utility)
