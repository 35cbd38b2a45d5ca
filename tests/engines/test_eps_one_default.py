"""Lambda's eps has one default for every door (docs/decomposition.md, "eps: the benefit
resolution"): what the model or system declares (``TabularModel.lambda_eps``, a System's
``gain.lambda_eps``; the lending models: 0.1), else the scale-free "auto"; chosen by
:func:`causalfair.engines.benefit.eps_for`, so a bare tabular model gets the same eps, source
and Lambda through cf.decompose, cf.benefit_fairness, the engines and the System built
from it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines import benefit as exact_benefit
from causalfair.engines.benefit_horizon import lambda_horizon
from causalfair.engines.benefit_mc import benefit_fairness_mc
from causalfair.engines.effects import decompose as exact_decompose
from causalfair.errors import ModelError
from causalfair.policies.resolver import resolve
from causalfair.systems import as_system, make

POLICY = "threshold:0.5"
T = 6


def _bare(lambda_eps=None, name="bare"):
    """lending-1's tabular model with its gain doubled, declaring ``lambda_eps``."""
    m = make("lending-1").tabular
    return dataclasses.replace(m, potential=2.0 * m.potential, name=name, lambda_eps=lambda_eps)


def test_a_bare_model_gets_the_same_eps_through_every_door():
    m = _bare()
    system = as_system(m)
    doors = {
        "benefit_fairness(model)": cf.benefit_fairness(m, POLICY, T),
        "benefit_fairness(system)": cf.benefit_fairness(system, POLICY, T),
        "engine benefit_fairness": exact_benefit.benefit_fairness(m, cf.policy_table(
            cf.parse_policy(POLICY, m), m), T),
    }
    eps = {k: (b.eps, b.eps_source) for k, b in doors.items()}
    assert len(set(eps.values())) == 1, eps
    ref = doors["benefit_fairness(system)"]
    assert ref.eps_source.startswith("auto") and ref.eps != 0.1
    assert {b.Lambda for b in doors.values()} == {ref.Lambda}
    lam = {cf.decompose(m, POLICY, T).Lambda, cf.decompose(system, POLICY, T).Lambda,
           exact_decompose(m, cf.policy_table(cf.parse_policy(POLICY, m), m), T).Lambda}
    assert lam == {ref.Lambda}
    # the old implicit 0.1 of a bare model is a different number
    assert cf.benefit_fairness(m, POLICY, T, eps=0.1).Lambda != pytest.approx(ref.Lambda)


def test_a_declared_eps_is_used_and_named_by_every_door():
    m = _bare(0.25, name="mine")
    source = "declared by system 'mine'"
    for b in (cf.benefit_fairness(m, POLICY, T), cf.benefit_fairness(as_system(m), POLICY, T),
              cf.benefit_fairness(m, POLICY, T, horizon_benefit=True),
              lambda_horizon(m, cf.policy_table(cf.parse_policy(POLICY, m), m), T)):
        assert b.eps == 0.25 and b.eps_source.startswith(source), (b.notion, b.eps_source)
    given = cf.benefit_fairness(m, POLICY, T, eps=0.25)
    assert given.eps_source == "given"
    assert cf.benefit_fairness(m, POLICY, T).Lambda == given.Lambda
    assert cf.decompose(m, POLICY, T).Lambda == given.Lambda
    system = as_system(m)
    mc = benefit_fairness_mc(system, resolve(POLICY, system).policy, T, n=50, n_boot=0)
    assert mc.eps == 0.25 and mc.eps_source.startswith(source)
    # a copy keeps the declaration unless it says otherwise
    assert m.with_(name="copy").lambda_eps == 0.25
    assert m.with_(lambda_eps=None).lambda_eps is None


def test_the_lending_models_declare_the_papers_eps():
    tab = make("lending-1").tabular
    assert tab.lambda_eps == 0.1 and make("lending-harder").tabular.lambda_eps == 0.1
    b = cf.benefit_fairness(tab, POLICY)
    assert b.eps == 0.1 and b.eps_source.startswith("declared by system 'lending-1'")
    assert b.Lambda == pytest.approx(0.150485427444203, rel=1e-12)  # the golden value
    assert make("lending-1").gain.lambda_eps == 0.1


@pytest.mark.parametrize("bad", [0, -0.1, float("nan"), float("inf"), True, "0.1"])
def test_a_bad_declared_eps_is_refused(bad):
    m = make("lending-1").tabular
    with pytest.raises(ModelError, match=r"lambda_eps: must be a number > 0"):
        dataclasses.replace(m, lambda_eps=bad)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "0.1"])
def test_a_bad_gain_eps_is_refused_at_construction_as_at_use(bad):
    """cf.Gain(lambda_eps=-1 or nan) was accepted and refused only when Lambda read it (as
    "eps: ..."); now refused when built, with the TabularModel's message, the one check
    (causalfair.model.check_lambda_eps) that eps_for also gives a declared value."""
    with pytest.raises(ModelError, match=r"^lambda_eps: must be a number > 0") as built:
        cf.systems.Gain(lambda_eps=bad)

    class Duck:  # a gain built around the constructor: refused at use, the same words
        gain = type("G", (), {"lambda_eps": bad})()
        id = "duck"
    with pytest.raises(ModelError) as used:
        exact_benefit.eps_for(None, Duck())
    assert str(used.value) == str(built.value)
    assert cf.systems.Gain(lambda_eps=np.float64(0.2)).lambda_eps == 0.2


def test_eps_for_reads_a_systems_tabular_model_when_its_gain_declares_none():
    m = _bare(0.3, name="tab")
    system = dataclasses.replace(as_system(m), gain=cf.systems.Gain())
    assert exact_benefit.eps_for(None, system)[0] == 0.3
    assert exact_benefit.eps_for(None, as_system(_bare()))[0] == "auto"
    assert exact_benefit.eps_for(0.2, system) == (0.2, None)
    assert np.isclose(cf.benefit_fairness(system, POLICY, T).eps, 0.3)
