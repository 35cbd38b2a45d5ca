"""More than two actions: the exact engine, Proposition 1 with
a benefit per action, and Lambda with the total-variation / sup-norm choice of
docs/decomposition.md, on a 3-action model worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import causalfair as cf
from causalfair.errors import ModelError, PolicyError


def three_action_model(baseline: int = 0) -> cf.TabularModel:
    """K = 2 levels (f = [0, 1]), A = 3 actions, action 0 the baseline.

    From level 0: a0 stays; a1 moves up w.p. 0.5; a2 w.p. 0.8 (s+) / 0.6 (s-).
    From level 1: a0 drops w.p. 0.2; a1 w.p. 0.1; a2 never.
    """
    k = np.zeros((2, 3, 2, 2))
    for s, up2 in ((0, 0.8), (1, 0.6)):
        k[s, 0, 0] = [1.0, 0.0]
        k[s, 1, 0] = [0.5, 0.5]
        k[s, 2, 0] = [1 - up2, up2]
        k[s, 0, 1] = [0.2, 0.8]
        k[s, 1, 1] = [0.1, 0.9]
        k[s, 2, 1] = [0.0, 1.0]
    return cf.TabularModel(kernel=k, initial=[[0.5, 0.5], [1.0, 0.0]], potential=[0.0, 1.0],
                           action_labels=("wait", "drug", "surgery"), baseline=baseline,
                           lambda_eps=0.1)


POLICY = np.array([[[0.2, 0.3, 0.5], [0.5, 0.5, 0.0]]] * 2)  # (G, K, A), same for both groups


def test_hand_computed_decomposition_T1():
    d = cf.decompose(three_action_model(), POLICY, 1)
    # V^pi: s+ 0.5 * 0.55 + 0.5 * (-0.15) = 0.2; s- 0.45. V^PS = V^pi0 = (-0.1, 0).
    assert d.V == pytest.approx([0.2, 0.45], abs=1e-15)
    assert d.V_ps == pytest.approx([-0.1, 0.0], abs=1e-15)
    assert (d.C, d.DPE, d.IPE, d.SPE) == pytest.approx((-0.25, -0.15, 0.0, -0.1), abs=1e-15)


def test_hand_computed_decomposition_T2():
    d = cf.decompose(three_action_model(), POLICY, 2)
    # worked out in the module docstring's model: mu_1 under pi = (0.3, 0.7) / (0.55, 0.45),
    # under pi0 = (0.6, 0.4) / (1, 0)
    assert d.V == pytest.approx([0.26, 0.63], abs=1e-14)
    assert d.V_ps == pytest.approx([-0.24, -0.09], abs=1e-14)
    assert d.V_0 == pytest.approx([-0.18, 0.0], abs=1e-14)
    assert (d.C, d.DPE, d.IPE, d.SPE) == pytest.approx((-0.37, -0.22, 0.03, -0.18), abs=1e-14)
    assert d.diagnostics_ok
    # Lambda, eps = 0.1, visitation weights (0.4, 0.6) and (0.775, 0.225); pairs with the
    # same level have TV 0; across levels TV = 0.5 and the sup-norm benefit gaps are 0.6, 0.4
    lam = 0.5 * 0.1 / 0.7 * 0.4 * 0.225 + 0.5 * 0.1 / 0.5 * 0.6 * 0.775
    assert d.Lambda == pytest.approx(lam, abs=1e-15)
    b = cf.benefit_fairness(three_action_model(), POLICY, 2)
    assert b.Lambda == pytest.approx(lam, abs=1e-15)
    assert b.delta.shape == (2, 2, 3) and b.delta[0, 0].tolist() == pytest.approx([0, 0.5, 0.8])
    assert b.dpe_prop1 == pytest.approx(d.DPE, abs=1e-14)
    assert list(b.worst_pairs(2)["contribution"]) == pytest.approx(
        [0.5 * 0.2 * 0.6 * 0.775, 0.5 * 0.1 / 0.7 * 0.4 * 0.225])


def test_policy_objects_and_tables_agree():
    m = three_action_model()
    table = cf.decompose(m, POLICY, 5)
    obj = cf.decompose(m, cf.TablePolicy(POLICY, n_actions=3), 5)

    class Probs:
        name = "fn"

        def action_probs(self, obs):
            return POLICY[obs.group, obs.level]

    fn = cf.decompose(m, Probs(), 5)
    for d in (obj, fn):
        assert (d.C, d.DPE, d.IPE, d.SPE, d.Lambda) == (table.C, table.DPE, table.IPE, table.SPE,
                                                        table.Lambda)


def test_binary_policy_on_a_three_action_model_is_refused():
    with pytest.raises(PolicyError, match="returns P\\(d1\\) only .* the system has 3 actions"):
        cf.decompose(three_action_model(), cf.ConstantPolicy(0.5), 3)
    with pytest.raises(ModelError, match=r"a model with 3 actions needs action distributions"):
        cf.decompose(three_action_model(), np.full((2, 2), 0.5), 3)


def test_a_third_action_that_is_never_taken_changes_nothing():
    """Embedding a two-action model in three actions (the third a copy of the baseline,
    never taken) gives the same decomposition and Lambda: the TV / sup-norm Lambda reduces
    to the paper's."""
    two = cf.lending_setting("lending-1").tabular
    k3 = np.concatenate([two.kernel, two.kernel[:, :1]], axis=1)
    r3 = np.concatenate([two.reward, two.reward[:, :1]], axis=1)
    three = two.with_(kernel=k3, reward=r3)
    p = cf.policy_table(cf.parse_policy("threshold:0.5", two), two)
    p3 = np.stack([1 - p, p, np.zeros_like(p)], axis=-1)
    a, b = cf.decompose(two, p, 20), cf.decompose(three, p3, 20)
    for q in ("C", "DPE", "IPE", "SPE", "Lambda", "total_utility"):
        assert getattr(b, q) == pytest.approx(getattr(a, q), abs=1e-12), q


def test_baseline_other_than_zero():
    """Relabelling the actions so that the baseline is action 2 gives the same numbers."""
    m = three_action_model()
    perm = [1, 2, 0]  # new action i = old action perm[i]; old baseline 0 is new 2
    m2 = m.with_(kernel=m.kernel[:, perm], reward=m.reward[:, perm], baseline=2,
                 action_labels=tuple(m.action_labels[i] for i in perm))
    a = cf.decompose(m, POLICY, 4)
    b = cf.decompose(m2, POLICY[..., perm], 4)
    for q in ("C", "DPE", "IPE", "SPE", "Lambda"):
        assert getattr(b, q) == pytest.approx(getattr(a, q), abs=1e-14), q


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 4), st.integers(2, 6), st.integers(3, 5), st.integers(1, 12),
       st.integers(0, 2**31 - 1))
def test_identities_hold_for_random_multi_action_models(G, K, A, T, seed):
    rng = np.random.default_rng(seed)
    m = cf.TabularModel(kernel=rng.dirichlet(np.ones(K), size=(G, A, K)),
                        initial=rng.dirichlet(np.ones(K), size=G), potential=rng.normal(size=K),
                        reward=rng.normal(size=(G, A, K)), baseline=int(rng.integers(A)))
    pol = rng.dirichlet(np.ones(A), size=(G, K))
    d = cf.decompose(m, pol, T)
    assert d.diagnostics_ok, d.diagnostics
    assert d.C == pytest.approx(d.DPE + d.IPE + d.SPE, abs=1e-12)
    # the baseline policy itself has no direct or indirect effect
    base = np.zeros((G, K, A))
    base[..., m.baseline] = 1.0
    d0 = cf.decompose(m, base, T)
    assert abs(d0.DPE) < 1e-12 and abs(d0.IPE) < 1e-12 and d0.Lambda == pytest.approx(0.0)
