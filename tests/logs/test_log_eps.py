"""A log audit picks Lambda's eps by the rule every door uses
(causalfair.engines.benefit.eps_for) on the model it fits: the default (lending)
potential declares 0.1, a potential of the user's own declares nothing ("auto")."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.benefit import auto_eps, benefit_fairness
from causalfair.logs import audit_logs, fit_logs, simulate_logs
from causalfair.policies.core import TablePolicy


@pytest.fixture(scope="module")
def log():
    model = cf.systems.make("lending-1", levels=4).tabular
    return simulate_logs(model, TablePolicy(np.full((2, 4), 0.5)), 400, 3, seed=5)


def test_default_potential_declares_the_lending_eps(log):
    a = audit_logs(log, n_boot=0)
    assert a.benefit.eps == 0.1
    assert a.benefit.eps_source.startswith("declared")


def test_own_potential_gets_the_scale_free_eps(log):
    pot = np.array([0.0, 10.0, 20.0, 30.0])  # gain units 10x the lending potential's scale
    a = audit_logs(log, n_boot=0, potential=pot)
    model, p_log, _ = fit_logs(log, potential=pot)
    ref = benefit_fairness(model, p_log, a.horizon, eps="auto")  # independent: the engine
    assert a.benefit.eps == pytest.approx(ref.eps) and a.benefit.eps != 0.1
    assert a.benefit.eps_source.startswith("auto")
    assert a.decomposition.Lambda == pytest.approx(ref.Lambda)


def test_a_given_eps_is_kept_and_fixed_across_replicates(log):
    a = audit_logs(log, n_boot=3, seed=1, eps=0.05)
    assert a.benefit.eps == 0.05 and a.benefit.eps_source == "given"
    b = audit_logs(log, n_boot=3, seed=1, eps="auto")
    assert b.benefit.eps == pytest.approx(auto_eps(b.benefit.delta)[0])
