"""The occupancy LP on two-action models whose baseline is d1 or that allow one action:
the DPE it bounds is the audit's (V^pi - V^PS scores each step under pi0's action), and a
forbidden action gets no occupancy (h8repair F3, F4)."""

from __future__ import annotations

import numpy as np
import pytest

from causalfair.engines.exact import exact_numbers
from causalfair.engines.frontier import frontier
from causalfair.engines.occupancy import InfeasibleError, fair_lp
from causalfair.model import TabularModel


def tiny(seed: int = 5) -> TabularModel:
    rng = np.random.default_rng(seed)
    reward = rng.normal(size=(2, 2, 2))
    reward[:, 0] = 0.0
    return TabularModel(kernel=rng.dirichlet(np.ones(2), size=(2, 2, 2)),
                        initial=rng.dirichlet(np.ones(2), size=2),
                        potential=np.sort(rng.uniform(0, 1, size=2)), reward=reward,
                        name="tiny")


@pytest.mark.parametrize("eps", [0.0, 0.01])
def test_dpe_bound_with_baseline_d1_is_the_audits(eps):
    m = tiny().with_(baseline=1)
    r = fair_lp(m, 2, eps=eps, constraint="DPE")
    audit = exact_numbers(m, r.policy, 2).scalars()
    assert audit["DPE"] == pytest.approx(r.DPE, abs=1e-9)  # was -0.762 against 0.0
    assert abs(audit["DPE"]) <= eps + 1e-9
    assert audit["utility"] == pytest.approx(r.utility, abs=1e-9)


def test_frontier_points_with_baseline_d1_meet_their_bound():
    m = tiny(7).with_(baseline=1)
    f = frontier(m, 3, points=5, constraint="DPE")
    for e, r in zip(f.eps, f.points, strict=True):
        assert abs(exact_numbers(m, r.policy, 3).scalars()["DPE"]) <= e + 1e-7  # solver tolerance


def test_lp_keeps_to_the_allowed_actions():
    m = tiny()
    only_d1 = fair_lp(m.with_(allowed=(1,)), 2, eps=None)  # was a PolicyError from its audit
    assert np.all(only_d1.policy == 1.0)
    never = exact_numbers(m, np.zeros((2, 2)), 2).scalars()
    with pytest.raises(InfeasibleError):  # d0 only: |C| is that of never, nothing smaller
        fair_lp(m.with_(allowed=(0,)), 2, eps=abs(never["C"]) - 1e-4)
    r = fair_lp(m.with_(allowed=(0,)), 2, eps=abs(never["C"]) + 1e-9)
    assert np.all(r.policy == 0.0)
    s = fair_lp(m.with_(allowed=(0,)), 2, eps=abs(never["C"]) + 1e-9, stationary=True)
    assert np.all(s.policy == 0.0)
