"""causalfair.stats: Welch numbers by hand and against scipy (an independent engine), Holm by
hand, and a claim that reaches each of the four verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from causalfair.errors import InputError
from causalfair.stats import (
    INCONCLUSIVE,
    INDISTINGUISHABLE,
    REFUTED,
    SUPPORTED,
    collapse_floor,
    holm,
    judge,
    t_quantile,
    welch,
)


def test_welch_by_hand():
    # a: mean 2.5, var 5/3; b: mean 6, var 10
    w = welch([1, 2, 3, 4], [2, 4, 6, 8, 10])
    se2 = (5 / 3) / 4 + 10 / 5
    assert w.diff == pytest.approx(-3.5)
    assert w.t == pytest.approx(-3.5 / math.sqrt(se2), rel=1e-12)
    assert w.df == pytest.approx(se2 ** 2 / ((5 / 12) ** 2 / 3 + 2.0 ** 2 / 4), rel=1e-12)
    # Hedges' g: pooled variance (3 * 5/3 + 4 * 10) / 7, correction 1 - 3 / 27
    assert w.hedges_g == pytest.approx(8 / 9 * -3.5 / math.sqrt(45 / 7), rel=1e-12)
    ref = sps.ttest_ind([1, 2, 3, 4], [2, 4, 6, 8, 10], equal_var=False)
    assert w.p == pytest.approx(ref.pvalue, rel=1e-9)
    lo, hi = ref.confidence_interval(0.95)
    assert w.ci == pytest.approx((lo, hi), rel=1e-9)


def test_welch_matches_scipy_on_random_samples():
    rng = np.random.default_rng(7)
    for n_a, n_b, shift, sd in ((10, 10, 0.3, 1.0), (3, 12, -2.0, 5.0), (25, 4, 0.01, 0.1)):
        a = rng.normal(0, 1, n_a)
        b = rng.normal(shift, sd, n_b)
        w = welch(a, b, alpha=0.1)
        ref = sps.ttest_ind(a, b, equal_var=False)
        assert (w.t, w.df, w.p) == pytest.approx((ref.statistic, ref.df, ref.pvalue), rel=1e-9)
        assert w.ci == pytest.approx(tuple(ref.confidence_interval(0.9)), rel=1e-9)
    for q, df in ((0.975, 2.0), (0.975, 5.52), (0.995, 37.3), (0.9, 1.0)):
        assert t_quantile(q, df) == pytest.approx(sps.t.ppf(q, df), rel=1e-10)


def test_welch_constant_samples_and_bad_input():
    w = welch([1.0, 1.0, 1.0], [1.0, 1.0])
    assert (w.p, w.diff, w.ci) == (1.0, 0.0, (0.0, 0.0))
    w = welch([1.0, 1.0], [2.0, 2.0])
    assert w.p == 0.0 and w.t == -math.inf
    with pytest.raises(InputError, match="at least 2"):
        welch([1.0], [1.0, 2.0])
    with pytest.raises(InputError, match="alpha"):
        welch([1.0, 2.0], [1.0, 2.0], alpha=1.5)


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 -> x3, x2, x1 = 0.03, 0.06, 0.04 -> monotone 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def _util(names, u=1.0):
    return {k: [u] * 10 for k in names}


M_GOOD = [0.10, 0.12, 0.11, 0.09, 0.10, 0.13, 0.08, 0.11, 0.10, 0.12]
X_BAD = [0.50, 0.55, 0.52, 0.49, 0.51, 0.53, 0.48, 0.50, 0.54, 0.52]
X_NOISY = [0.05, 0.30, 0.02, 0.25, 0.10, 0.18, 0.01, 0.20, 0.07, 0.15]


def test_supported_and_refuted():
    v = judge({"m": M_GOOD, "x": X_BAD, "y": [x + 0.1 for x in X_BAD]}, "m", lower=True,
              utility=_util("mxy"), claim="m has the lowest bias", metric="bias")
    assert v.verdict == SUPPORTED
    assert v.versus == "x" and v.effect == pytest.approx(np.mean(M_GOOD) - np.mean(X_BAD))
    assert v.p_value < 1e-10 and v.ci[1] < 0 and v.utility == {"m": 1.0, "x": 1.0, "y": 1.0}
    # the same numbers, higher is better: x is significantly better than m
    v = judge({"m": M_GOOD, "x": X_BAD}, "m", lower=False, utility=_util("mx"))
    assert v.verdict == REFUTED and v.versus == "x" and v.effect < 0
    d = v.to_dict()
    assert d["verdict"] == "refuted" and d["comparisons"][0]["better"] == "competitor"


def test_inconclusive_and_holm_correction():
    v = judge({"m": M_GOOD, "x": X_NOISY}, "m", lower=True, utility=_util("mx"))
    assert v.verdict == INCONCLUSIVE and v.p_value > 0.05
    # two comparisons each with raw p between 0.025 and 0.05: Holm makes the weaker one
    # 2 * p_min or p_max, whichever is larger; both above 0.05 here -> not supported
    m = [0.0, 1.0] * 5
    x = [v + 0.52 for v in m]
    y = [v + 0.55 for v in m]
    raw = [welch(m, x).p, welch(m, y).p]
    assert all(0.025 < p < 0.05 for p in raw), raw
    v = judge({"m": m, "x": x, "y": y}, "m", lower=True, utility=_util("mxy"))
    assert v.verdict == INCONCLUSIVE and v.p_value > 0.05
    assert all(c["p"] < 0.05 for c in v.comparisons)


def test_indistinguishable_by_actions_and_by_identical_numbers():
    v = judge({"m": M_GOOD, "x": X_BAD, "y": X_NOISY}, "m", lower=True, utility=_util("mxy"),
              action_gap={"x": 0.3, "y": 0.004}, tol=0.01)
    assert v.verdict == INDISTINGUISHABLE and v.versus == "y"
    v = judge({"m": [2.2] * 10, "x": [2.2] * 10}, "m", lower=True, utility=_util("mx"))
    assert v.verdict == INDISTINGUISHABLE
    # a significantly better competitor refutes, whatever else takes the same actions
    v = judge({"m": X_BAD, "x": X_BAD, "y": M_GOOD}, "m", lower=True, utility=_util("mxy"))
    assert v.verdict == REFUTED and v.versus == "y"


def test_collapsed_policies_are_not_counted():
    vals = {"m": M_GOOD, "x": X_BAD, "z": [0.0] * 10}
    util = {"m": [3.0] * 10, "x": [4.0] * 10, "z": [0.1] * 10}
    floor = collapse_floor(0.2, 4.0)
    assert floor == pytest.approx(0.2 + 0.25 * 3.8)
    # z (lowest bias, utility 0.1) is collapsed: it neither refutes nor counts
    v = judge(vals, "m", lower=True, utility=util, fairness=True, utility_floor=floor)
    assert v.verdict == SUPPORTED and v.collapsed == ["z"]
    # without the collapse rule, z refutes the claim
    assert judge(vals, "m", lower=True, utility=util).verdict == REFUTED
    # the method itself collapsed: its fairness gain is not a win
    util["m"] = [1.0] * 10
    v = judge({"m": M_GOOD, "x": X_BAD}, "m", lower=True, utility=util, fairness=True,
              utility_floor=floor)
    assert v.verdict == INCONCLUSIVE and "collapsed" in v.reason and v.utility["m"] == 1.0
    assert collapse_floor(1.0, 0.5) == 1.0


def test_judge_bad_input():
    with pytest.raises(InputError, match="utility"):
        judge({"m": M_GOOD, "x": X_BAD}, "m", lower=True, utility={"m": [1.0] * 10})
    with pytest.raises(InputError, match="competitor"):
        judge({"m": M_GOOD}, "m", lower=True, utility={"m": [1.0] * 10})
