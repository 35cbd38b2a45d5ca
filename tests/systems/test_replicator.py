"""replicator-1 (the replicator dynamics of Yin et al. NeurIPS 2023): U's constraints, the equation against a
hand computation, and the decomposition against a hand recursion (deterministic
dynamics: the Monte Carlo engine is exact for a deterministic policy)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import SystemError_
from causalfair.policies.core import parse_policy
from causalfair.systems.replicator import REPLICATOR_DEFAULTS, check_utility_matrix


def Phi(x):
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def step_by_hand(q, a, U=REPLICATOR_DEFAULTS["U"]):
    """One replicator step for one group, written out from Yin et al. App. A.1."""
    (u_nn, u_np), (u_pn, u_pp) = U  # rows y = -1, +1; columns y_hat = -1, +1
    tpr = 0.0 if a == math.inf else 1.0 - Phi(a - 1.0)
    fpr = 0.0 if a == math.inf else 1.0 - Phi(a + 1.0)
    w_pos = u_pp * tpr + u_pn * (1 - tpr)
    w_neg = u_np * fpr + u_nn * (1 - fpr)
    return q * w_pos / (q * w_pos + (1 - q) * w_neg), q * tpr  # q', reward (task tp)


@pytest.mark.parametrize("U,constraint", [
    (((0.5, 0.4), (0.6, 0.8)), "acceptance is always preferred' for y = -1"),
    (((0.5, 1.0), (0.9, 0.8)), "acceptance is always preferred' for y = \\+1"),
    (((0.5, 0.7), (0.6, 0.8)), "among the accepted, being qualified costs more"),
    (((0.6, 1.0), (0.5, 0.8)), "no dominant strategy"),
    (((0.0, 1.0), (0.6, 0.8)), "every entry must be > 0"),
    ((1, 2, 3), "2 x 2 matrix"),
])
def test_a_utility_matrix_that_breaks_a_constraint_is_refused_by_name(U, constraint):
    with pytest.raises(SystemError_, match=constraint):
        check_utility_matrix(U)
    with pytest.raises(SystemError_, match=constraint):
        cf.systems.make("replicator-1", U=U)


def test_the_default_U_satisfies_every_constraint():
    check_utility_matrix(REPLICATOR_DEFAULTS["U"])


def test_two_steps_against_a_hand_computation():
    system = cf.systems.make("replicator-1")
    sim = system.make_simulator()
    s = sim.reset(1, None, np.random.default_rng(0))
    th = REPLICATOR_DEFAULTS["thresholds"]
    q = list(REPLICATOR_DEFAULTS["q0"])
    for acts in ([1, 3], [5, 0]):  # 5 = reject all (the baseline)
        res = sim.step(s, np.array(acts), sim.draw_noise(1, np.random.default_rng(0)))
        for g in range(2):
            a = math.inf if acts[g] == 5 else th[acts[g]]
            q_next, r = step_by_hand(q[g], a)
            assert res.state.q[g] == pytest.approx(q_next, abs=1e-15)
            assert res.gain[g] == pytest.approx(q_next - q[g], abs=1e-15)
            assert res.reward[g] == pytest.approx(r, abs=1e-15)
            q[g] = q_next
        obs = sim.observe(res.state)
        np.testing.assert_allclose(obs.features, [[q[0], q[1]], [q[1], q[0]]], atol=1e-15)
        s = res.state


def test_decomposition_of_a_deterministic_policy_equals_the_hand_recursion():
    """Threshold 0.5 for both groups over T = 30: V, V^PS, V^pi0 recomputed by hand; the
    Monte Carlo estimates are exact (standard errors 0), and C = DPE + IPE + SPE."""
    T = 30
    system = cf.systems.make("replicator-1")
    d = cf.decompose_mc(system, parse_policy("action:2", system), T, n=3, seed=0)
    th = REPLICATOR_DEFAULTS["thresholds"][2]
    V, V_ps, V_0, q_end, qb_end = [], [], [], [], []
    for q0 in REPLICATOR_DEFAULTS["q0"]:
        q, qb, ps = q0, q0, 0.0
        for _ in range(T):
            ps += step_by_hand(q, math.inf)[0] - q  # h0(q_t): the fork's gain on pi's path
            q = step_by_hand(q, th)[0]
            qb = step_by_hand(qb, math.inf)[0]
        V.append(q - q0)
        V_ps.append(ps)
        V_0.append(qb - q0)
        q_end.append(q)
        qb_end.append(qb)
    np.testing.assert_allclose(d.V, V, atol=1e-12)
    np.testing.assert_allclose(d.V_ps, V_ps, atol=1e-12)
    np.testing.assert_allclose(d.V_0, V_0, atol=1e-12)
    assert d.se["C"] == 0.0 and d.se["IPE"] == 0.0
    assert d.C == pytest.approx(d.DPE + d.IPE + d.SPE, abs=1e-12)
    assert abs(d.IPE) > 1e-4  # h0 depends on q: the indirect effect is informative
    # Yin et al.'s qualification-rate gap at T, under pi and under pi0
    assert d.notions["long_term_gap"] == pytest.approx(abs(q_end[0] - q_end[1]), abs=1e-12)
    assert d.notions["long_term_gap_pi0"] == pytest.approx(abs(qb_end[0] - qb_end[1]),
                                                           abs=1e-12)


def test_seeding_gives_identical_results_and_a_stochastic_policy_has_mc_error():
    system = cf.systems.make("replicator-1")
    pol = parse_policy("uniform", system)
    a = cf.decompose_mc(system, pol, 20, n=200, seed=5)
    b = cf.decompose_mc(system, pol, 20, n=200, seed=5)
    assert a.C == b.C and a.IPE == b.IPE and a.se["C"] > 0
    assert a.C == pytest.approx(a.DPE + a.IPE + a.SPE, abs=1e-12)
