"""Lambda_T, benefit fairness over the horizon (causalfair.engines.benefit_horizon), on a
model worked by hand where the benefit of a decision is entirely delayed for one group.

Levels 0, 1, 2, 3 with potential f = (0, 0, 10, 0) for both groups; T = 2.
- s+ (group 0): d1 at level 0 moves to level 1 (gain 0 this step), from where any
  decision moves to 2 (gain 10 at the next step); d0 at level 0 moves to the absorbing
  level 3 (gain 0, nothing later).
- s- (group 1): d1 at level 0 moves to level 2 at once (gain 10); d0 to level 3.
Levels 1 and 2 move to 2 and stay there, 3 stays 3, whatever the decision.
Everyone starts at level 0. The policy denies s+ and approves s- at level 0 (d0 elsewhere).

Same-step benefits at level 0: Delta(0, s+) = 0, Delta(0, s-) = 10. Over the horizon
(from t = 0, the only step anyone is at level 0): Delta^T(0, s+) = (0 + 10) - 0 = 10 and
Delta^T(0, s-) = (10 + 0) - 0 = 10: the same benefit, opposite treatment.

Initial weights (w(0 | s) = 1), eps = 0.1:
    Lambda   = 0.1 * |0 - 1| / (0.1 + |0 - 10|)  = 0.1 / 10.1 = 0.00990...
    Lambda_T = 0.1 * |0 - 1| / (0.1 + |10 - 10|) = 1.
Visitation weights (s+ at 0 then 3, s- at 0 then 2: 1/2 each), pairs with a different
decision are (0, 0) and (3, 0):
    Lambda   = 0.25 * 0.1 / 10.1 + 0.25 * 0.1 / 10.1              = 0.0049505
    Lambda_T = 0.25 * 0.1 / 0.1  + 0.25 * 0.1 / (0.1 + |0 - 10|)   = 0.2524752
(at level 3, t = 1, s+ has Delta^T = 0: nothing is left to gain).
"""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.benefit_horizon import (
    horizon_benefits,
    lambda_horizon,
    lambda_horizon_exact,
)
from causalfair.engines.benefit_mc import benefit_fairness_mc
from causalfair.model import TabularModel
from causalfair.systems import as_system


def _model() -> TabularModel:
    K = 4
    kern = np.zeros((2, 2, K, K))
    for s in range(2):
        for a in range(2):
            kern[s, a, 1, 2] = kern[s, a, 2, 2] = kern[s, a, 3, 3] = 1.0
        kern[s, 0, 0, 3] = 1.0
    kern[0, 1, 0, 1] = 1.0  # s+: approval pays off one step later
    kern[1, 1, 0, 2] = 1.0  # s-: approval pays off at once
    init = np.zeros((2, K))
    init[:, 0] = 1.0
    return TabularModel(kernel=kern, initial=init, potential=np.tile([0.0, 0.0, 10.0, 0.0], (2, 1)),
                        group_names=("plus", "minus"), name="delayed")


POLICY = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])  # pi(d1 | x, s)


def test_benefits_to_the_horizon_by_hand():
    dt = horizon_benefits(_model(), POLICY, 2)  # (T, G, K, A)
    assert dt.shape == (2, 2, 4, 2)
    assert dt[0, :, 0, 1].tolist() == [10.0, 10.0]  # the same benefit over the horizon
    assert dt[1, :, 0, 1].tolist() == [0.0, 10.0]  # last step: only the immediate gain
    assert _model().benefit()[:, 0].tolist() == [0.0, 10.0]  # same-step: s+ sees nothing


def test_lambda_misses_the_delayed_benefit_lambda_t_sees_it():
    m = _model()
    lam = cf.benefit_fairness(m, POLICY, 2, eps=0.1, weights="initial")
    lam_t = cf.benefit_fairness(m, POLICY, 2, eps=0.1, weights="initial", horizon_benefit=True)
    assert lam.Lambda == pytest.approx(0.1 / 10.1, rel=1e-12)
    assert lam_t.Lambda == pytest.approx(1.0, rel=1e-12) and lam_t.notion == "Lambda_T"
    vis = lambda_horizon_exact(m, POLICY, 2, eps=0.1)
    assert cf.benefit_fairness(m, POLICY, 2, eps=0.1).Lambda == pytest.approx(0.5 * 0.1 / 10.1)
    assert vis.Lambda == pytest.approx(0.25 + 0.25 * 0.1 / 10.1, rel=1e-12)
    assert "over the horizon: Lambda_T = 0.252475" in vis.summary()
    # T = 1: nothing is delayed, Lambda_T is Lambda
    assert cf.benefit_fairness(m, POLICY, 1, eps=0.1, horizon_benefit=True).Lambda == \
        pytest.approx(cf.benefit_fairness(m, POLICY, 1, eps=0.1).Lambda, rel=1e-12)


def test_lambda_t_by_forks_matches_the_hand_numbers():
    system = as_system(_model())
    mc = cf.benefit_fairness(system, POLICY, 2, eps=0.1, engine="mc", n=200,
                             horizon_benefit=True)
    assert mc.method == "mc" and mc.notion == "Lambda_T"
    # deterministic moves: every fork's benefit is exact, only the weights are sampled
    assert mc.Lambda == pytest.approx(0.25 + 0.25 * 0.1 / 10.1, rel=1e-12)
    assert mc.ci is not None and mc.ci[0] <= mc.Lambda <= mc.ci[1]
    same = cf.benefit_fairness(system, POLICY, 2, eps=0.1, engine="mc", n=200)
    assert same.Lambda == pytest.approx(0.5 * 0.1 / 10.1, rel=1e-12)


def test_lambda_t_reports_the_dpe_of_proposition_1():
    # approving both groups at level 0: the DPE counts the same-step benefits (s+ gains
    # nothing this step, s- gains 10): -10; with Delta^T in its place it read 10 - 10 = 0
    both = np.array([[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    m = _model()
    dpe = cf.decompose(m, both, 2, eps=0.1).DPE
    assert dpe == pytest.approx(-10.0, abs=1e-12)
    assert cf.benefit_fairness(m, both, 2, eps=0.1).dpe_prop1 == pytest.approx(dpe, abs=1e-12)
    for model, engine in ((m, "exact"), (as_system(m), "mc")):
        lam_t = cf.benefit_fairness(model, both, 2, eps=0.1, engine=engine, n=200,
                                    horizon_benefit=True)
        assert lam_t.notion == "Lambda_T" and lam_t.method == engine
        assert lam_t.dpe_prop1 == pytest.approx(dpe, abs=1e-12)  # deterministic forks
        assert "DPE (Proposition 1 form) = -10.000000" in lam_t.summary()
        assert lam_t.to_dict()["DPE_prop1"] == pytest.approx(dpe, abs=1e-12)


def test_lambda_t_by_forks_dpe_is_unbiased_on_lending():
    s = cf.systems.make("lending-1")
    dpe = cf.decompose(s, "threshold:0.5", 5).DPE  # +0.0655; Delta^T's gap read -0.03
    assert cf.benefit_fairness(s, "threshold:0.5", 5, horizon_benefit=True).dpe_prop1 == \
        pytest.approx(dpe, abs=1e-12)
    mc = cf.benefit_fairness(s, "threshold:0.5", 5, horizon_benefit=True, engine="mc",
                             n=10_000, seed=1)
    assert abs(mc.dpe_prop1 - dpe) < 0.035  # sd over seeds about 0.013 at this n


def test_audit_spec_reports_lambda_t(tmp_path):
    from causalfair.audit import audit, load_spec
    from causalfair.systems import make

    p = tmp_path / "lt.toml"
    p.write_text('name = "lt"\nhorizon = 10\n[model]\nsetting = "lending-1"\n[benefit]\n'
                 'horizon_benefit = true\n[thresholds]\nLambda = 1\n', encoding="utf-8")
    res = audit(load_spec(p))
    system = make("lending-1")
    want = lambda_horizon_exact(system.tabular, res.policy_table, 10, eps=0.1).Lambda
    assert res.notions["Lambda_T"] == pytest.approx(want, rel=1e-12)
    assert res.extra["Lambda_T"]["eps_source"].startswith("declared by system 'lending-1'")
    assert res.notions["Lambda_T"] != pytest.approx(res.benefit.Lambda)
    p.write_text(p.read_text().replace("horizon_benefit = true", 'horizon_benefit = "yes"'))
    with pytest.raises(cf.CausalfairError, match=r"\[benefit\] horizon_benefit: bad value"):
        load_spec(p)


@pytest.mark.parametrize("policy", ["threshold:0.5", np.full((2, 7), 0.3)])
def test_engines_called_directly_take_what_every_door_takes(policy):
    """benefit_fairness_mc and lambda_horizon (both engines) resolve the policy as
    cf.benefit_fairness does (a built-in name, a table): the same numbers as a TablePolicy /
    the resolved policy, where they used to refuse "policy 'str': has neither prob_d1 ..."."""
    system = cf.systems.make("lending-1")
    same = cf.policies.resolve(policy, system).policy
    a = benefit_fairness_mc(system, policy, 3, n=300, seed=1, jobs=1, n_boot=20)
    b = benefit_fairness_mc(system, same, 3, n=300, seed=1, jobs=1, n_boot=20)
    assert (a.Lambda, a.ci) == (b.Lambda, b.ci)
    for engine in ("exact", "mc"):
        a = lambda_horizon(system, policy, 3, engine=engine, n=200)
        b = lambda_horizon(system, same, 3, engine=engine, n=200)
        assert a.Lambda == b.Lambda
    assert lambda_horizon(system, policy, 3).Lambda == pytest.approx(
        cf.benefit_fairness(system, policy, 3, horizon_benefit=True).Lambda, abs=1e-15)


def test_lambda_t_by_forks_refuses_initial_weights_called_directly():
    """lambda_horizon(engine="mc", weights="initial") returned a visitation-weighted
    Lambda_T (weights "visitation"), the weights left unused; cf.benefit_fairness refused."""
    from causalfair.model import ModelError

    with pytest.raises(ModelError, match=r"^weights: bad value 'initial'; by forks"):
        lambda_horizon(cf.systems.make("lending-1"), "threshold:0.5", 3, engine="mc",
                       weights="initial", n=100)
