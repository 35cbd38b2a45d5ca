"""The constrained repair optimises the pair it judges and reports (``pair=``, a gate's
``[engine] pair``), and its LP bound bounds that pair: checked against policies found by
hand on tiny tabular models (h8repair F1, F2)."""

from __future__ import annotations

import itertools

import numpy as np

from causalfair.engines.exact import exact_numbers
from causalfair.engines.occupancy import fair_lp
from causalfair.model import TabularModel
from causalfair.train.repair import Constraint, best_found, lp_bound

FAST = dict(eps=0.1, n_random=2, outer=8, inner=60)


def two_groups() -> TabularModel:
    ker = np.array([[[[.9, .1], [.2, .8]], [[.5, .5], [.1, .9]]],
                    [[[.9, .1], [.2, .8]], [[.3, .7], [.05, .95]]]])
    return TabularModel(kernel=ker, initial=[[.4, .6], [.7, .3]], potential=[0., 1.],
                        reward=[[[0, 0], [-.2, .5]]] * 2, name="two")


def three_groups() -> TabularModel:
    """A and B identical (every policy that treats them alike has C(A, B) = 0); C's gain
    reacts strongly to approval, so a bound on every pair costs utility."""
    same = [[[.9, .1], [.2, .8]], [[.5, .5], [.1, .9]]]
    other = [[[.9, .1], [.2, .8]], [[.05, .95], [.0, 1.]]]
    return TabularModel(kernel=np.array([same, same, other]), initial=[[.6, .4]] * 3,
                        potential=[0., 1.], reward=[[[0, 0], [-.2, .5]]] * 3,
                        group_names=["A", "B", "C"], name="three")


def test_reversed_pair_signed_threshold_is_optimised_on_that_pair():
    m, T = two_groups(), 2
    # a grid over stationary tables finds passing ones for C(s-, s+) <= -0.05
    best = max(s["utility"] for f in itertools.product(np.linspace(0, 1, 6), repeat=4)
               if (s := exact_numbers(m, np.array(f).reshape(2, 2), T, pair=(1, 0)).scalars())
               ["C"] <= -0.05)
    r = best_found(m, T, [Constraint("C", -0.05)], pair=(1, 0), **FAST)
    assert r.passed  # was: no passing repair (the optimiser read C(s+, s-) = -C(s-, s+))
    assert r.best.metrics["C"] <= -0.05
    assert r.best.utility >= best - 1e-3


def test_named_pair_of_three_groups_is_the_constrained_one():
    m, T = three_groups(), 2
    always = exact_numbers(m, np.ones((3, 2)), T, pair=(0, 1)).scalars()
    assert always["C"] == 0.0  # passes abs_C <= 0.01 for (A, B)
    r = best_found(m, T, [Constraint("abs_C", 0.01)], pair=(0, 1), **FAST)
    assert r.passed and abs(r.best.metrics["C"]) <= 0.01
    # was 0.384: the optimiser bounded C of the largest and smallest V instead
    assert r.best.utility >= always["utility"]


def test_lp_bound_bounds_the_named_pair_only():
    m, T = three_groups(), 2
    free = fair_lp(m, T, eps=None)  # C(A, B) = 0: it passes abs_C <= 0.01 for (A, B)
    assert abs(exact_numbers(m, free.policy, T, pair=(0, 1)).scalars()["C"]) <= 1e-12
    u, keys, _ = lp_bound(m, T, [Constraint("abs_C", 0.01)], pair=(0, 1))
    assert keys == ("abs_C",)
    assert u >= free.utility - 1e-9  # was 0.4288 < 0.4617: every pair was bounded
    r = best_found(m, T, [Constraint("abs_C", 0.01)], pair=(0, 1), **FAST)
    assert r.best.utility <= r.bound + 1e-9


def test_lp_bound_of_three_groups_without_a_pair_leaves_out_dpe():
    # the default pair (largest and smallest V^pi) depends on the policy: its DPE is no
    # linear function of the occupancy, so a bound on every pair's DPE would be no bound
    m, T = three_groups(), 2
    u, keys, _ = lp_bound(m, T, [Constraint("abs_C", 0.5), Constraint("abs_DPE", 0.0)])
    assert keys == ("abs_C",)
    assert u == lp_bound(m, T, [Constraint("abs_C", 0.5)])[0]
