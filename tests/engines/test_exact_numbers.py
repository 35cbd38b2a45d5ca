"""causalfair.engines.exact.exact_numbers: the one function that turns a policy table into
the exact numbers, and every door that reads its numbers from it (audit, fair-LP
evaluation, PPO trainer, exact repair, system trainer), bit for bit on lending-1."""

from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.audit.run import audit
from causalfair.engines.benefit import benefit_fairness
from causalfair.engines.effects import decompose
from causalfair.engines.exact import METRIC_NAMES, exact_numbers
from causalfair.engines.notions import other_notions
from causalfair.engines.occupancy import policy_metrics
from causalfair.policies.grid import policy_table
from causalfair.policies.resolver import resolve
from causalfair.thresholds import parse_constraint
from causalfair.train.config import TrainConfig
from causalfair.train.core import exact_metrics
from causalfair.train.generic import SystemTrainer
from causalfair.train.repair import best_found

ROOT = Path(__file__).resolve().parents[2]
T = 20


@pytest.fixture(scope="module")
def model():
    return cf.lending_setting("lending-1").tabular


@pytest.fixture(scope="module")
def table(model):
    return np.asarray(policy_table(resolve("threshold:0.5", model).policy, model, T))


def same_decomposition(a, b):
    for k in ("V", "V_ps", "V_0", "utility", "steps"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k
    assert a.pair == b.pair
    assert a.Lambda == b.Lambda and a.Lambda_ci == b.Lambda_ci
    assert (a.C, a.DPE, a.IPE, a.SPE) == (b.C, b.DPE, b.IPE, b.SPE)


def test_identities_and_the_underlying_engines(model, table):
    """C = DPE + IPE + SPE, and the numbers are exactly those of decompose,
    benefit_fairness and other_notions called on the table."""
    n = exact_numbers(model, table, T, eps=0.2, weights="initial", benefit=True, notions=True)
    d = n.decomposition
    assert abs(d.C - (d.DPE + d.IPE + d.SPE)) <= 1e-12
    assert abs(d.C) > 1e-3  # a non-trivial case: the threshold policy is unfair on lending-1
    same_decomposition(d, decompose(model, table, T, eps=0.2, weights="initial"))
    ben = benefit_fairness(model, table, T, eps=0.2, weights="initial")
    assert n.benefit.Lambda == ben.Lambda
    assert np.array_equal(n.benefit.contributions, ben.contributions)
    assert n.notions == other_notions(model, table, T)
    s = n.scalars()
    assert tuple(s) == METRIC_NAMES
    assert s["C"] == d.C and s["utility"] == d.total_utility and s["Lambda"] == d.Lambda
    assert all(type(v) is float for v in s.values())
    # not asked for: not computed
    bare = exact_numbers(model, table, T)
    assert bare.benefit is None and bare.notions is None


def test_a_policy_object_gives_the_numbers_of_its_table(model, table):
    """A Policy is evaluated once into its table; the numbers equal decompose on the
    policy itself, and the name is the policy's."""
    pol = resolve("threshold:0.5", model).policy
    n = exact_numbers(model, pol, T)
    same_decomposition(n.decomposition, decompose(model, pol, T))
    assert n.decomposition.policy_name == decompose(model, pol, T).policy_name
    same_decomposition(n.decomposition, exact_numbers(model, table, T).decomposition)


def test_a_model_that_is_not_tabular_is_refused_with_decompose_message(model):
    with pytest.raises(cf.errors.ModelError, match="expected a TabularModel"):
        exact_numbers(object(), resolve("threshold:0.5", model).policy, T)


def test_audit_reads_its_exact_numbers_from_the_one_function():
    res = audit(ROOT / "audits" / "lending-1.toml")
    s = res.spec
    n = exact_numbers(res.model, res.policy_table, s.horizon, eps=s.eps, weights=s.weights,
                      policy_name=res.decomposition.policy_name, benefit=True, notions=True)
    same_decomposition(res.decomposition, n.decomposition)
    assert res.benefit.Lambda == n.benefit.Lambda
    assert np.array_equal(res.benefit.contributions, n.benefit.contributions)
    assert {k: res.notions[k] for k in n.notions} == n.notions


def test_policy_metrics_reads_the_one_function(model, table):
    m = policy_metrics(model, "threshold:0.5", T, eps=0.3)
    d = exact_numbers(model, table, T, eps=0.3).decomposition
    same_decomposition(m["decomposition"], d)
    assert (m["C"], m["DPE"], m["IPE"], m["SPE"], m["Lambda"], m["utility"]) == (
        d.C, d.DPE, d.IPE, d.SPE, d.Lambda, d.total_utility)


def test_train_exact_metrics_reads_the_one_function(model, table):
    m = exact_metrics(model, table, T, eps=0.25)
    n = exact_numbers(model, table, T, eps=0.25, notions=True)
    s = n.scalars()
    assert list(m)[:6] == ["C", "DPE", "IPE", "SPE", "Lambda", "utility"]
    assert all(m[k] == s[k] for k in METRIC_NAMES)
    assert m["tpr_gap"] == n.notions["tpr_gap"] and m["dp_gap"] == n.notions["dp_gap"]


def test_repair_attempts_read_the_one_function(model, table):
    cons = [parse_constraint("abs_C<=0.05")]
    res = best_found(model, T, cons, eps=0.1, initial={"threshold": table}, n_random=1,
                     outer=1, inner=1, seed=0)
    assert res.attempts
    for a in res.attempts:
        s = exact_numbers(model, a.table, T, eps=0.1).scalars()
        assert dict(a.metrics) == s and list(a.metrics) == list(s)


def test_system_trainer_audit_reads_the_one_function():
    tr = SystemTrainer(cf.systems.make("lending-1"), TrainConfig(
        algo="ppo", system="lending-1", iterations=1))
    assert tr.tabular is not None
    out = tr.audit()
    d = exact_numbers(tr.tabular, tr.policy(), tr.T).decomposition
    direct = decompose(tr.tabular, tr.policy(), tr.T)  # the policy object itself
    same_decomposition(d, direct)
    assert (out["C"], out["DPE"], out["IPE"], out["SPE"], out["utility"], out["Lambda"]) == (
        d.C, d.DPE, d.IPE, d.SPE, d.total_utility, d.Lambda)
