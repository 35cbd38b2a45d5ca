"""Lambda by forks: every bootstrap replicate runs the pre-test on its own gaps
(benefit_mc.pretest: the mask is part of the estimator), and the plug-in's bootstrap
standard error is taken from replicates linear in the benefit gaps (benefit_mc.plugin_tangent),
so a gap estimated near 0 does not fold.

Before: the replicates kept the estimate's mask, so a zeroed gap added nothing to the
thresholded estimate's spread (lending-harder at n = 5,000 per group: se 0.0020 against
a spread of 0.0074 over seeds).

Before: each replicate recomputed the plug-in with |gap_r|, which folds at 0, so where the
true gaps are small but not 0 the replicates spread less than the estimate (lending-harder
at n = 5,000 per group: se 0.0040 against a spread of 0.0045 over seeds, the smaller the
more the gaps sat near 0) and the hull covered 0.89. The coverage itself is the slow test
tests/test_intervals_honest.py::test_lambda_hull_covers_with_small_nonzero_gaps."""

from __future__ import annotations

import numpy as np
import pytest

from causalfair.engines import benefit_mc
from causalfair.engines.benefit_mc import benefit_fairness_mc, plugin_tangent, pretest
from causalfair.policies.core import TablePolicy
from causalfair.systems import make


def _signed(*gaps: float) -> np.ndarray:
    """One pair of cells, actions (d0, d1, ...), baseline d0: the signed benefit gaps
    (1, 1, A), the baseline's 0."""
    return np.array([[[0.0, *gaps]]])


ONE = np.ones((1, 1))  # one pair of cells, weight product 1


def test_replicates_on_both_sides_of_a_zero_gap_spread():
    """Estimated gap 0, replicates at +h and -h (eps = 0.1, h = 0.01, total variation
    0.5): |gap_r| = h in both, so the folded plug-in replicates 0.5 eps / (eps + h) are
    equal (se 0), while the tangent's are 0.5 (1 -/+ h / eps) = 0.45 and 0.55 by hand:
    the spread of the gap itself."""
    eps, h, tv = 0.1, 0.01, 0.5 * ONE
    est = _signed(0.0)
    tangent = plugin_tangent(est, np.abs(est), 0, eps)
    reps = [_signed(+h), _signed(-h)]
    folded = [0.5 * eps / (eps + abs(r[0, 0, 1])) for r in reps]
    assert folded[0] == folded[1]  # the old replicates: no spread at all
    got = [tangent(r, tv, ONE) for r in reps]
    assert got == pytest.approx([0.45, 0.55], abs=1e-15)
    assert np.std(got, ddof=1) == pytest.approx(0.1 / np.sqrt(2), rel=1e-12)


def test_tangent_is_the_plug_in_at_the_estimate_and_its_slope_away():
    """At the estimate itself the tangent is the plug-in term (every gap moved by 0); a
    gap estimated at -0.02 and a replicate at -0.03 (|gap| 0.01 larger, same sign) moves
    it by -slope x 0.01 with slope eps / (eps + 0.02)^2: the sign is the estimate's."""
    eps, tv = 0.1, 0.5 * ONE
    est = _signed(-0.02)
    tangent = plugin_tangent(est, np.abs(est), 0, eps)
    plug = 0.5 * eps / (eps + 0.02)
    assert tangent(est, tv, ONE) == pytest.approx(plug, rel=1e-15)
    assert tangent(_signed(-0.03), tv, ONE) == pytest.approx(
        plug - 0.5 * eps / 0.12 ** 2 * 0.01, rel=1e-12)
    # three actions, baseline 1: the active action is the one with the largest |gap|
    g3 = np.array([[[0.04, 0.0, -0.01]]])
    t3 = plugin_tangent(g3, np.abs(g3), 1, eps)
    assert t3(g3, 0.3 * ONE, ONE) == pytest.approx(0.3 * eps / 0.14, rel=1e-14)
    r3 = np.array([[[0.05, 0.0, -0.01]]])  # active gap 0.05: |gap| 0.01 larger
    assert t3(r3, 0.3 * ONE, ONE) == pytest.approx(0.3 * (eps / 0.14 - eps / 0.14 ** 2 * 0.01),
                                                   rel=1e-12)
    r3[0, 0, 2] = -0.2  # an inactive action's gap does not move the tangent
    assert t3(r3, 0.3 * ONE, ONE) == t3(np.array([[[0.05, 0.0, -0.01]]]), 0.3 * ONE, ONE)


def _lending_harder():
    system = make("lending-harder")
    rng = np.random.default_rng(123)  # the coverage study's stochastic table
    return system, TablePolicy(rng.uniform(0.05, 0.95, size=(2, system.tabular.n_levels)))


def test_interval_holds_its_estimates_and_is_reproducible_across_jobs():
    """lending-harder, n = 5,000, one seed: the hull holds the thresholded and the plug-in
    estimate (lambda_hull's guarantee), and seed 0 gives the same bits on 1 and 2 threads
    and on a second call."""
    system, pol = _lending_harder()
    kw = dict(n=5000, seed=0, n_boot=40, check=False)
    one = benefit_fairness_mc(system, pol, 5, jobs=1, **kw)
    two = benefit_fairness_mc(system, pol, 5, jobs=2, **kw)
    again = benefit_fairness_mc(system, pol, 5, jobs=1, **kw)
    assert (one.Lambda, one.se, one.ci) == (two.Lambda, two.se, two.ci)
    assert (one.Lambda, one.se, one.ci) == (again.Lambda, again.se, again.ci)
    assert one.ci[0] <= one.Lambda <= one.ci[1]


def test_each_replicate_reruns_the_pretest():
    """One pair of cells, estimated gap 0.01, cut 0.02: zeroed. Replicates with gaps 0.01
    and 0.03: the first stays zeroed, the second is not (0.03 > 0.02), so its thresholded
    term is eps tv / (eps + 0.03) = 0.5 x 0.1 / 0.13 against 0.5 for the first (eps = 0.1,
    tv = 0.5, weights 1): a spread, where the estimate's mask held fixed gives 0.5 in both
    (se 0). Per action: the baseline's column (gap 0) is always within the cut."""
    cut = np.full((1, 1, 2), 0.02)
    est, low, high = (np.abs(_signed(g)) for g in (0.01, 0.01, 0.03))
    assert pretest(est, cut).tolist() == [[[True, True]]]
    assert pretest(low, cut).tolist() == [[[True, True]]]
    assert pretest(high, cut).tolist() == [[[True, False]]]
    eps, tv = 0.1, 0.5

    def thresholded(gap, mask):
        return float((eps * tv / (eps + np.where(mask, 0.0, gap).max(-1))).sum())

    own = [thresholded(g, pretest(g, cut)) for g in (low, high)]
    held = [thresholded(g, pretest(est, cut)) for g in (low, high)]
    assert own == pytest.approx([0.5, 0.05 / 0.13]) and held == [0.5, 0.5]


def test_se_with_the_pretest_in_every_replicate_matches_an_independent_count():
    """lending-harder, n = 5,000, seed 0, 40 replicates: the reported se equals the spread
    of the thresholded Lambda recomputed here from the same replicates (each with its own
    mask, the formula of docs/decomposition.md), and is at least twice the spread with the
    estimate's mask held fixed (small non-zero gaps zeroed in the estimate and not in many
    replicates)."""
    from causalfair.engines.benefit import eps_for, resolve_eps
    from causalfair.policies.grid import engine_policy

    system, pol = _lending_harder()
    T, n, R = 5, 5000, 40
    b = benefit_fairness_mc(system, pol, T, n=n, seed=0, n_boot=R, jobs=1, check=False)
    K, _, _, delta, prob, w, reps, _, _ = benefit_mc._cell_stats(
        system, engine_policy(pol, system, 2, horizon=T), T, n, 0, 4, R, "p", 1, None, None,
        None)
    eps = resolve_eps(eps_for(None, system)[0], delta[..., 1:], None)[0]
    assert eps == b.eps
    gaps = [r[0][0][:, None, :] - r[0][1][None, :, :] for r in reps]
    cut = np.sqrt(np.log(n)) * np.std(gaps, axis=0, ddof=1)

    def lam(d, p, wt, mask):
        g = np.where(mask, 0.0, np.abs(d[0][:, None, :] - d[1][None, :, :])).max(-1)
        tv = 0.5 * np.abs(p[0][:, None, :] - p[1][None, :, :]).sum(-1)
        return float((eps * tv / (eps + g) * wt[0][:, None] * wt[1][None, :]).sum())

    fixed = np.abs(delta[0][:, None, :] - delta[1][None, :, :]) <= cut
    assert lam(delta, prob, w, fixed) == pytest.approx(b.Lambda, rel=1e-12)
    own = [lam(*r, np.abs(g) <= cut) for r, g in zip(reps, gaps, strict=True)]
    held = [lam(*r, fixed) for r in reps]
    assert b.se == pytest.approx(np.std(own, ddof=1), rel=1e-9)
    assert b.se >= 2 * np.std(held, ddof=1), (b.se, np.std(held, ddof=1))
