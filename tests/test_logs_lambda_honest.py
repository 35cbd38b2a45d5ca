"""Lambda from decision logs covers its level: every bootstrap replicate runs the pre-test
on its own gaps (causalfair.engines.benefit_mc.pretest: the mask is part of the
estimator), and the plug-in's replicates are linear in the benefit gaps
(benefit_mc.plugin_tangent), as in the Monte Carlo engine (tests/test_lambda_honest.py).

Before: the estimate's masks were held in every replicate and the plug-in's replicates
used |gap_r|, which folds at 0. On lending-harder (a stochastic logged policy, 5 steps)
the thresholded estimate's bootstrap sd was a third of its spread over logs, and at
20,000 individuals the normal hull covered 0.905 over 200 logs (in the first 100 every
miss had the truth below the lower end); now 0.995 (docs/logs.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from causalfair.engines.benefit_mc import lambda_hull
from causalfair.engines.effects import decompose
from causalfair.logs import audit_logs, simulate_logs
from causalfair.logs.pretest import threshold_lambda
from causalfair.policies.core import TablePolicy
from causalfair.systems import make

EPS = 0.1


def _one_pair(bd_plus, bp_plus=(0.6, 0.6)):
    """One level, two groups, two replicates: pi(d1) 0.6 / 0.4 (dp 0.2), Delta 0.11 / 0.1
    (gap 0.01), weights 1; the replicates move the first group's Delta (and pi) only."""
    p, delta, w = np.array([[0.6], [0.4]]), np.array([[0.11], [0.1]]), np.ones((2, 1))
    bd = np.stack([delta, delta])
    bd[:, 0, 0] = bd_plus
    bp = np.stack([p, p])
    bp[:, 0, 0] = bp_plus
    return threshold_lambda(p, delta, w, bp, bd, np.stack([w, w]), pair=(0, 1), eps=EPS,
                            c=1.0)


def test_each_replicate_reruns_the_pretest_on_its_own_benefit_gap():
    """Replicate gaps 0.03 and -0.01 around the estimate's 0.01: se 0.04 / sqrt 2 = 0.0283,
    the cut (c = 1) too. The estimate's gap 0.01 is zeroed (Lambda 0.1 x 0.2 / 0.1 = 0.2);
    replicate 1's 0.03 is above the cut, so it is kept there: 0.1 x 0.2 / 0.13; replicate
    2's is zeroed: 0.2. With the estimate's mask held, both were 0.2 (sd 0)."""
    res = _one_pair([0.13, 0.09])
    assert res["se_gap"][0, 0] == pytest.approx(0.04 / np.sqrt(2), abs=1e-15)
    assert res["zero_gap"].tolist() == [[True]] and res["zero_dp"].tolist() == [[False]]
    assert res["value"] == pytest.approx(0.2, abs=1e-15)
    assert res["plugin"] == pytest.approx(0.02 / 0.11, abs=1e-15)
    assert res["replicates"] == pytest.approx([0.02 / 0.13, 0.2], abs=1e-15)
    assert np.std(res["replicates"], ddof=1) == pytest.approx((0.2 - 0.02 / 0.13) / np.sqrt(2))


def test_each_replicate_reruns_the_pretest_on_its_own_policy_gap():
    """The policy gap: pi(d1 | x, s+) replicates 0.5 and 0.4 against s-'s 0.4 (dp 0.1 and
    0, se 0.0707 = the cut); the estimate's dp 0.2 is kept (0.2 > 0.0707), replicate 1's
    0.1 too, replicate 2's 0 is zeroed (no number changes, it is 0). The gap is far
    from its cut here (Delta replicates 0.11 and 0.11: se 0, never masked)."""
    res = _one_pair([0.11, 0.11], bp_plus=[0.5, 0.4])
    assert res["se_dp"][0, 0] == pytest.approx(0.1 / np.sqrt(2), abs=1e-15)
    assert not res["zero_dp"].any() and not res["zero_gap"].any()  # se_gap 0: never masked
    assert res["replicates"] == pytest.approx([0.1 * 0.1 / 0.11, 0.0], abs=1e-15)
    # a policy gap near 0: estimate dp 0.01 zeroed; replicates 0.1 (above the cut
    # 0.1 / sqrt 2 x 1 = 0.0707: kept) and 0 (zeroed)
    p, delta, w = np.array([[0.41], [0.4]]), np.array([[0.3], [0.1]]), np.ones((2, 1))
    bp = np.stack([p, p])
    bp[:, 0, 0] = [0.5, 0.4]
    res = threshold_lambda(p, delta, w, bp, np.stack([delta, delta]), np.stack([w, w]),
                           pair=(0, 1), eps=EPS, c=1.0)
    assert res["zero_dp"].tolist() == [[True]] and res["value"] == 0.0
    assert res["replicates"] == pytest.approx([0.1 * 0.1 / 0.3, 0.0], abs=1e-15)


def test_plugin_replicates_are_the_tangent_in_the_benefit_gap():
    """The same pair: eps / (eps + |gap|) by its tangent at the estimate's |gap| = 0.01,
    1 / 1.1 - (0.1 / 0.11^2) (g - 0.01) for a replicate's signed gap g (0.03, -0.01), times
    the replicate's |dp| (0.2) and weights (1). The folded replicates 0.02 / 0.13 and
    0.02 / 0.11 (|-0.01| = 0.01) spread 0.028; the tangent's 0.066."""
    res = _one_pair([0.13, 0.09])
    level, slope = 0.1 / 0.11, 0.1 / 0.11 ** 2
    assert res["plugin_replicates"] == pytest.approx(
        [(level - slope * 0.02) * 0.2, (level + slope * 0.02) * 0.2], abs=1e-15)
    spread = np.ptp(res["plugin_replicates"])
    assert spread == pytest.approx(2 * slope * 0.02 * 0.2, abs=1e-15)  # 0.0661
    assert spread > 2 * (0.02 / 0.11 - 0.02 / 0.13)  # the folded spread, 0.028


def _harder_stochastic():
    """lending-harder's model and a stochastic logged policy (benchmarks/coverage_study.py's
    table), with its exact Lambda at 5 steps."""
    tab = make("lending-harder").tabular
    pol = TablePolicy(np.random.default_rng(123).uniform(0.05, 0.95, size=(2, tab.n_levels)))
    return pol, decompose(tab, pol, 5).Lambda


@pytest.fixture(scope="module")
def harder_log():
    return simulate_logs("lending-harder", _harder_stochastic()[0], 3000, 5, seed=10_003)


@pytest.fixture(scope="module")
def harder_audit(harder_log):
    return audit_logs(harder_log, n_boot=40, seed=3, horizon=5)


def test_an_audits_replicates_recomputed_independently(harder_audit):
    """From the audit's own replicate arrays, by the formulas (not the library's
    functions): each replicate's thresholded Lambda with its own masks, the plug-in's
    tangent replicate, and the normal hull of both (LogAudit.lambda_interval)."""
    a = harder_audit
    lam, ben = a.lambda_estimate, a.benefit
    bp, bd, bw = a.replicate_arrays
    (i, j), eps, c = lam.pair, ben.eps, lam.c_n
    gap = ben.delta[i][:, None] - ben.delta[j][None, :]
    bgap = bd[:, i, :, None] - bd[:, j, None, :]
    bdp = bp[:, i, :, None] - bp[:, j, None, :]
    ww = bw[:, i, :, None] * bw[:, j, None, :]
    se_g, se_d = bgap.std(axis=0, ddof=1), bdp.std(axis=0, ddof=1)
    own_g = (se_g > 0) & (np.abs(bgap) <= c * se_g)
    own_d = (se_d > 0) & (np.abs(bdp) <= c * se_d)
    held = (eps * np.abs(np.where(lam.zero_dp, 0, bdp))
            / (eps + np.abs(np.where(lam.zero_gap, 0, bgap))) * ww).sum((1, 2))
    thr = (eps * np.abs(np.where(own_d, 0, bdp)) / (eps + np.abs(np.where(own_g, 0, bgap)))
           * ww).sum((1, 2))
    at = np.abs(gap)
    fac = eps / (eps + at) - eps / (eps + at) ** 2 * (np.sign(gap) * bgap - at)
    plug = (fac * np.abs(bdp) * ww).sum((1, 2))
    boot = a.bootstrap
    assert lam.zero_gap.any() and (own_g != lam.zero_gap).any()  # replicates' masks differ
    assert boot["Lambda[thresholded]"].to_numpy() == pytest.approx(thr, rel=1e-12)
    assert boot["Lambda[plugin]"].to_numpy() == pytest.approx(plug, rel=1e-12)
    assert np.array_equal(boot["Lambda"], boot["Lambda[thresholded]"])
    # the held mask spread less (this log: about a third)
    assert thr.std(ddof=1) > 1.5 * held.std(ddof=1)
    hull = lambda_hull([(lam.value, thr.std(ddof=1)), (lam.plugin, plug.std(ddof=1))], 0.05)
    assert a.lambda_interval(0.05, method="normal") == pytest.approx(hull, rel=1e-12)
    assert a.decomposition.Lambda_ci == pytest.approx(hull, rel=1e-12)
    assert a.decomposition.se["Lambda"] == pytest.approx(thr.std(ddof=1), rel=1e-12)


def test_same_seed_same_bits_and_the_estimate_unchanged(harder_log, harder_audit):
    a, df = harder_audit, harder_log
    again = audit_logs(df, n_boot=40, seed=3, horizon=5)
    cols = ["Lambda", "Lambda[thresholded]", "Lambda[plugin]"]
    assert again.bootstrap[cols].equals(a.bootstrap[cols])
    assert again.lambda_interval(0.05) == a.lambda_interval(0.05)
    other = audit_logs(df, n_boot=40, seed=4, horizon=5)
    assert not np.array_equal(other.bootstrap["Lambda[plugin]"], a.bootstrap["Lambda[plugin]"])
    # the point estimates do not depend on the replicates' masks (the estimate's own
    # pre-test, against the same cuts): the plug-in is the exact engine's on the fit
    plugin = audit_logs(df, n_boot=40, seed=3, horizon=5, lambda_estimator="plugin")
    assert plugin.decomposition.Lambda == a.lambda_estimate.plugin
    assert np.array_equal(plugin.bootstrap["Lambda"], a.bootstrap["Lambda[plugin]"])


def _coverage(n: int, seeds: range, n_boot: int) -> tuple[int, list, list]:
    """(logs whose normal hull holds the exact Lambda, thresholded estimates, their
    bootstrap sds) over ``seeds`` logs of ``n`` individuals x 5 steps."""
    pol, truth = _harder_stochastic()
    hits, thr, thr_se = 0, [], []
    for s in seeds:
        a = audit_logs(simulate_logs("lending-harder", pol, n, 5, seed=10_000 + s),
                       n_boot=n_boot, seed=s, horizon=5)
        lo, hi = a.lambda_interval(0.05, method="normal")
        hits += lo <= truth <= hi
        thr.append(a.lambda_estimate.value)
        thr_se.append(a.bootstrap["Lambda[thresholded]"].std(ddof=1))
    return hits, thr, thr_se


def test_thresholded_se_matches_its_spread_over_logs_few_seeds():
    """lending-harder, stochastic logged policy, 5,000 individuals x 5 steps, 30 logs:
    the thresholded estimate's mean bootstrap sd against its sd over the logs (0.0094
    against 0.0076 over 100 logs; with the estimate's mask in every replicate 0.0029,
    a ratio of 0.38), and the normal hull covers (loose bound)."""
    hits, thr, thr_se = _coverage(5000, range(30), 100)
    assert np.mean(thr_se) > 0.7 * np.std(thr, ddof=1)
    assert hits >= 27


@pytest.mark.slow
def test_lambda_hull_covers_on_lending_harder_many_seeds():
    """20,000 individuals x 5 steps, 100 logs, 200 replicates: the normal hull covered
    0.89 (11 misses, all below the plug-in's lower end); now 1.00."""
    hits, thr, thr_se = _coverage(20_000, range(100), 200)
    assert hits >= 95
    assert np.mean(thr_se) > 0.7 * np.std(thr, ddof=1)
