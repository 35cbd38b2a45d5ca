"""eps = "auto" over the benefits of those present: a declared departed level (benefit 0 by
definition, weight 0 in Lambda) is left out of the percentile, as Lambda by forks leaves
its visits out, so the exact engine and the forks aim at the same Lambda. The exact table
counted the departed levels' zeros: on the model below (one departed level) eps 0.1042 and
Lambda 0.0460 against the present levels' 0.1214 and 0.0514, which the forks estimate; with
four departed levels (unreachable copies) 0.0769 and 0.0366."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import causalfair as cf
from causalfair.engines.benefit import auto_eps
from causalfair.engines.exact_torch import exact_metrics
from causalfair.model import TabularModel

TAB = np.array([[0.2, 0.6, 0.9], [0.7, 0.3, 0.1]])  # pi(d1) at the present levels


def _model(gone: int) -> TabularModel:
    """Three present levels and ``gone`` departed ones (absorbing, gain 0)."""
    rng = np.random.default_rng(4)
    K = 3 + gone
    kern = np.zeros((2, 2, K, K))
    kern[:, :, :3, :4] = rng.dirichlet(np.ones(4), size=(2, 2, 3))  # leave to level 3
    for x in range(3, K):
        kern[:, :, x, x] = 1.0
    init = np.zeros((2, K))
    init[:, :3] = [[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]]
    return TabularModel(kernel=kern, initial=init, potential=[0.0, 1.0, 2.5] + [0.0] * gone,
                        departed_levels=list(range(3, K)))


def _table(gone: int) -> np.ndarray:
    return np.concatenate([TAB, np.zeros((2, gone))], axis=1)


@pytest.mark.parametrize("gone", [1, 4])
def test_auto_eps_is_over_the_present_levels(gone):
    m = _model(gone)
    want = auto_eps(m.benefit()[:, :3])[0]  # the present levels' benefits
    ben = cf.benefit_fairness(m, _table(gone), 4)
    assert ben.eps == want and ben.eps_source.startswith("auto")
    lam = cf.benefit_fairness(m, _table(gone), 4, eps=want).Lambda
    assert ben.Lambda == lam == cf.decompose(m, _table(gone), 4).Lambda
    assert float(exact_metrics(m, torch.tensor(_table(gone)), 4)["Lambda"]) == \
        pytest.approx(lam, abs=1e-12)
    assert cf.benefit_fairness(m, _table(gone), 4, horizon_benefit=True).eps == \
        cf.benefit_fairness(_model(1), _table(1), 4, horizon_benefit=True).eps


def test_exact_and_forks_aim_at_the_same_lambda():
    m = _model(1)
    exact = cf.benefit_fairness(m, _table(1), 4)
    assert exact.eps == cf.benefit_fairness(_model(4), _table(4), 4).eps  # departed: no say
    forks = cf.benefit_fairness(cf.as_system(m), _table(1), 4, engine="mc", n=20_000)
    assert abs(forks.eps - exact.eps) < 0.002  # the forks' estimate of the same percentile
    assert forks.ci[0] <= exact.Lambda <= forks.ci[1]


def test_lambda_t_worst_pairs_never_list_a_departed_level():
    """Lambda_T's exact result did not say which levels are departed, so its worst pairs
    listed pairs with the departed level 4 (weight 0), as Lambda's never do."""
    m = _model(1)
    for ben in (cf.benefit_fairness(m, _table(1), 4),
                cf.benefit_fairness(m, _table(1), 4, horizon_benefit=True)):
        assert ben.departed == (3,)
        cells = ben.worst_pairs(16).iloc[:, :2].to_numpy().ravel().tolist()
        assert cells and "4" not in cells
