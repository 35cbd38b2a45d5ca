"""A time-indexed policy table longer than the horizon: every exact door reads its first T
epochs (policies.grid.check_policy_table cuts it, as a TablePolicy's table is cut), the
numbers of the table cut by hand; it crashed with numpy's broadcasting ValueError."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.notions import other_notions
from causalfair.model import TabularModel


def _models():
    rng = np.random.default_rng(0)
    lending = cf.systems.make("lending-1").tabular
    yield lending, rng.random((5, 2, 7))
    three = TabularModel(kernel=rng.dirichlet(np.ones(3), size=(2, 3, 3)),
                         initial=rng.dirichlet(np.ones(3), size=2), potential=[0.0, 1.0, 3.0])
    yield three, rng.dirichlet(np.ones(3), size=(5, 2, 3))


@pytest.mark.parametrize("case", list(_models()), ids=["two-actions", "three-actions"])
def test_a_longer_table_is_read_for_its_first_epochs(case):
    model, table = case
    T = 3
    cut = table[:T]
    dec, want = cf.decompose(model, table, T), cf.decompose(model, cut, T)
    assert (dec.C, dec.DPE, dec.IPE, dec.SPE, dec.Lambda) == \
        (want.C, want.DPE, want.IPE, want.SPE, want.Lambda)
    ben, ben_cut = cf.benefit_fairness(model, table, T), cf.benefit_fairness(model, cut, T)
    assert (ben.Lambda, ben.dpe_prop1) == (ben_cut.Lambda, ben_cut.dpe_prop1)
    lam_t = cf.benefit_fairness(model, table, T, horizon_benefit=True)
    assert lam_t.Lambda == cf.benefit_fairness(model, cut, T, horizon_benefit=True).Lambda
    assert other_notions(model, table, T)["dp_gap"] == other_notions(model, cut, T)["dp_gap"]
    assert cf.compare_groups(model, table, T).pairs["s--s+"]["C"][0] == -want.C  # s- minus s+
