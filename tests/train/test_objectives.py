"""Objectives of the trainer: penalty values and gradient signs on tiny hand-made batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from causalfair.engines.benefit import lambda_pairs
from causalfair.train import objectives as obj
from causalfair.train.core import adapt_beta_kl, bernoulli_kl, gae


# --------------------------------------------------------------------------- PPO core
def test_gae_matches_hand_computation():
    # one stream, 3 steps, episode ends after step 1 (index 1), gamma 0.9, lambda 0.8
    r = np.array([[1.0], [2.0], [3.0]])
    v = np.array([[0.5], [1.0], [2.0], [4.0]])  # V(s0..s2) and bootstrap V(s3)
    done = np.array([[False], [True], [False]])
    g, lam = 0.9, 0.8
    d2 = 3.0 + g * 4.0 - 2.0  # 4.6
    d1 = 2.0 + 0.0 - 1.0  # episode ends: no bootstrap
    d0 = 1.0 + g * 1.0 - 0.5  # 1.4
    a2 = d2
    a1 = d1  # the episode boundary cuts the recursion
    a0 = d0 + g * lam * a1  # 1.4 + 0.72
    adv, ret = gae(r, v, done, g, lam)
    np.testing.assert_allclose(adv[:, 0], [a0, a1, a2])
    np.testing.assert_allclose(ret[:, 0], [a0 + 0.5, a1 + 1.0, a2 + 2.0])


def test_gae_lambda_one_is_discounted_return_minus_value():
    rng = np.random.default_rng(0)
    r = rng.normal(size=(6, 4))
    v = np.concatenate([rng.normal(size=(6, 4)), np.zeros((1, 4))])
    done = np.zeros((6, 4), bool)
    done[-1] = True
    adv, _ = gae(r, v, done, 0.95, 1.0)
    disc = np.array([sum(0.95 ** k * r[t + k] for k in range(6 - t)) for t in range(6)])
    np.testing.assert_allclose(adv, disc - v[:-1], atol=1e-12)


def test_adaptive_kl_rule():
    assert adapt_beta_kl(1.0, 0.02, 0.01) == 2.0
    assert adapt_beta_kl(1.0, 0.005, 0.01) == 0.5
    assert adapt_beta_kl(1.0, 0.01, 0.01) == 1.0
    assert adapt_beta_kl(1.0, 0.0149, 0.01) == 1.0


def test_bernoulli_kl_closed_form():
    p, q = torch.tensor([0.3, 0.5]), torch.tensor([0.6, 0.5])
    want = 0.3 * np.log(0.3 / 0.6) + 0.7 * np.log(0.7 / 0.4)
    got = bernoulli_kl(p, q)
    assert got[0].item() == pytest.approx(want, rel=1e-6)
    assert got[1].item() == pytest.approx(0.0, abs=1e-7)


# ------------------------------------------------------------------------------ PPO-C
def _tiny():
    group = torch.tensor([0, 0, 1, 1])
    q = torch.tensor([1.0, 3.0, 0.5, 0.5], dtype=torch.float64)
    return group, q


def test_c_hat_value_and_penalty_gradient_sign():
    group, q = _tiny()
    ratio = torch.tensor([1.0, 1.0, 1.0, 1.0], dtype=torch.float64, requires_grad=True)
    pen, c = obj.ppo_c_penalty(ratio, q, group, beta_c=2.0)
    assert c.item() == pytest.approx((1 + 3) / 2 - 0.5)  # 1.5
    assert pen.item() == pytest.approx(2.0 * 1.5**2)
    pen.backward()
    # d pen / d ratio_i = 2 beta C q_i / n_g * (+1 for s+, -1 for s-)
    np.testing.assert_allclose(ratio.grad.numpy(), [2 * 2 * 1.5 * 1 / 2, 2 * 2 * 1.5 * 3 / 2,
                                                   -2 * 2 * 1.5 * 0.5 / 2, -2 * 2 * 1.5 * 0.5 / 2])
    # minimising the loss lowers s+ ratios and raises s- ratios: C falls toward 0
    assert (ratio.grad[:2] > 0).all() and (ratio.grad[2:] < 0).all()


def test_c_hat_anchored_value_is_c_batch_and_gradient_scaled():
    group, q = _tiny()
    ratio = torch.ones(4, dtype=torch.float64, requires_grad=True)
    c = obj.c_hat_anchored(ratio, q, group, c_batch=-0.2, scale=5.0)
    assert c.item() == pytest.approx(-0.2)
    c.backward()
    np.testing.assert_allclose(ratio.grad.numpy(), 5.0 * np.array([0.5, 1.5, -0.25, -0.25]))
    # with C < 0 the penalty's gradient pushes the other way round
    ratio.grad = None
    pen, _ = obj.ppo_c_penalty(ratio, q, group, 1.0, c_batch=-0.2, scale=5.0)
    pen.backward()
    assert (ratio.grad[:2] < 0).all() and (ratio.grad[2:] > 0).all()


def test_c_hat_through_policy_logits():
    # ratio = pi_theta / pi_old with pi = sigmoid(theta): raising an s+ d1-probability
    # where Q > 0 raises C_hat
    theta = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    p = torch.sigmoid(theta)
    ratio = p / 0.5
    c = obj.c_hat(ratio, torch.tensor([1.0, 1.0], dtype=torch.float64), torch.tensor([0, 1]))
    c.backward()
    assert theta.grad[0] > 0 and theta.grad[1] < 0


def test_gain_to_go():
    g = np.array([[1.0, 0.0], [2.0, -1.0], [3.0, 5.0]])
    np.testing.assert_allclose(obj.gain_to_go(g), [[6.0, 4.0], [5.0, 4.0], [3.0, 5.0]])


# ----------------------------------------------------------------------------- PPO-Cb
def test_batch_visitation():
    w = obj.batch_visitation(np.array([0, 0, 1, 2, 2]), np.array([0, 0, 0, 1, 1]), 2, 3)
    np.testing.assert_allclose(w, [[2 / 3, 1 / 3, 0.0], [0.0, 0.0, 1.0]])


def test_lambda_torch_matches_benefit_module_and_gradient_sign():
    rng = np.random.default_rng(1)
    p = rng.uniform(size=(2, 4))
    delta = rng.normal(size=(2, 4))
    w = rng.dirichlet(np.ones(4), size=2)
    want = lambda_pairs(p, delta, w, (0, 1), 0.1).sum()
    pt = torch.tensor(p, requires_grad=True)
    lam = obj.lambda_torch(pt, torch.tensor(delta), torch.tensor(w), 0.1)
    assert lam.item() == pytest.approx(want, rel=1e-12)
    lam.backward()
    # the largest s+ probability above every s- probability: raising it raises Lambda
    p[0, 0] = 1.0
    pt = torch.tensor(p, requires_grad=True)
    obj.lambda_torch(pt, torch.tensor(delta), torch.tensor(w), 0.1).backward()
    assert (p[1] < 1.0).all() and pt.grad[0, 0] > 0
    # equal policies for both groups: Lambda = 0
    same = torch.tensor(np.full((2, 4), 0.3))
    assert obj.lambda_torch(same, torch.tensor(delta), torch.tensor(w), 0.1).item() == 0.0


# ------------------------------------------------------------------------------ A-PPO
def test_running_and_loo_tpr_gap():
    # stream: s+ repays approved, s- repays denied, s- repays approved
    action = np.array([[1], [0], [1]])
    repay = np.array([[True], [True], [True]])
    group = np.array([[0], [1], [1]])
    before, after = obj.running_tpr_gap(action, repay, group)
    np.testing.assert_allclose(after[:, 0], [1.0, 1.0, 0.5])
    np.testing.assert_allclose(before[:, 0], [0.0, 1.0, 1.0])
    b, a = obj.loo_tpr_gap(action[:, 0], repay[:, 0], group[:, 0])
    np.testing.assert_allclose(a, [0.5, 0.5, 0.5])
    # without sample 0: TPR+ undefined (0), TPR- 0.5 -> 0.5; without 1: 1 - 1 = 0; without 2: 1 - 0
    np.testing.assert_allclose(b, [0.5, 0.0, 1.0])


def test_appo_advantage_penalises_gap_increase():
    adv = np.array([0.0, 0.0, 1.0])
    state = np.array([0.1, 0.1, 0.1])  # gap above omega: divergence term active
    change = np.array([0.05, -0.05, 0.0])
    out = obj.appo_advantage(adv, state, change, 1.0, 0.25, 0.25, 0.005)
    assert out[0] < out[1]  # same utility advantage, the gap-raising decision scores lower
    # hand: mm(A) = [0, 0, 1]; vt constant -> 0; div = [-0.05, 0, 0] -> mm = [0, 1, 1]
    np.testing.assert_allclose(out, [0.0, 0.25, 1.25], atol=1e-6)
    # below omega the divergence term is off
    out2 = obj.appo_advantage(adv, np.zeros(3), change, 1.0, 0.25, 0.25, 0.005)
    np.testing.assert_allclose(out2, [0.0, 0.0, 1.0], atol=1e-6)


# ---------------------------------------------------------------------------- F-PPO-L
def _w1(levels, groups, K):
    c = [np.cumsum(np.bincount(levels[groups == g], minlength=K)) / (groups == g).sum()
         for g in (0, 1)]
    return np.abs(c[0] - c[1])[:-1].sum()


def test_w1_change_matches_brute_force():
    rng = np.random.default_rng(3)
    K = 5
    level = rng.integers(0, K, size=(2, 9))
    nxt = np.clip(level + rng.integers(-2, 3, size=level.shape), 0, K - 1)
    group = np.tile(np.array([0, 1, 0, 1, 1, 0, 0, 1, 0]), (2, 1))
    got = obj.w1_change(level, nxt, group, K)
    for t in range(2):
        base = _w1(level[t], group[t], K)
        for i in range(9):
            moved = level[t].copy()
            moved[i] = nxt[t, i]
            assert got[t, i] == pytest.approx(_w1(moved, group[t], K) - base, abs=1e-12)


def test_fppol_branches():
    adv = np.zeros(4)
    violated = np.array([True, True, False, False])
    dw1 = np.array([0.2, -0.2, 0.2, -0.2])
    out = obj.fppol_advantage(adv, violated, dw1, 1.0, 1.12, 1.0)
    # violated: W1 rising is penalised (long1 = -0.2), falling is neutral (0)
    # satisfied: W1 falling is rewarded (long2 = 0.2), rising is neutral (0)
    # mm(long1) = [0, 1, 1, 1]; mm(long2) = [0, 0, 0, 1]
    np.testing.assert_allclose(out, [0.0, 1.12, 1.12, 2.12], atol=1e-6)
    assert out[0] < out[1] and out[3] > out[2]


def test_massage_schedule_and_flips():
    assert obj.massage_tau(3, 0.5, 3, 0.985) == 0.5
    assert obj.massage_tau(5, 0.5, 3, 0.985) == pytest.approx(0.5 * 0.985**2)
    p = np.array([0.5, 0.5, 0.5, 0.5, 0.95, 0.5])
    action = np.array([0, 1, 1, 0, 0, 0])
    repay = np.array([True, True, True, False, True, True])
    group = np.array([1, 0, 1, 1, 1, 0])
    flips = obj.massage_flips(p, action, repay, group, signed_gap=0.2, tau=0.3)
    # s- (low TPR) would-repay denied -> approve; s+ would-repay approved -> deny;
    # s- approved: already fair side; non-repayer: no TPR change; confident: kept;
    # s+ would-repay denied: flipping raises the gap
    np.testing.assert_array_equal(flips, [True, True, False, False, False, False])
    assert not obj.massage_flips(p, action, repay, group, 0.0, 0.3).any()


def test_massage_cohort_never_overshoots_the_gap():
    """A cohort's flips are taken one at a time against the gap the previous ones left,
    so each one strictly lowers |TPR gap| and the gap never grows (all at once, every
    low-confidence would-repay applicant flipped: the gap went from 0.2 to past -0.6)."""
    # group 0: 5 would-repay, 4 approved (TPR 0.8); group 1: 5 would-repay, 3 approved (0.6)
    group = np.array([0] * 5 + [1] * 5)
    repay = np.ones(10, dtype=bool)
    action = np.array([1, 1, 1, 1, 0, 1, 1, 1, 0, 0])
    p = np.full(10, 0.5)
    flips = obj.massage_cohort(p, action, repay, group, tau=0.3)
    after = obj.cohort_tpr_gap((action ^ flips)[None], repay[None], group[None])[0]
    # by hand, in order: deny member 0 (gap 0.2 -> 0.0); nothing further lowers |gap|
    np.testing.assert_array_equal(np.flatnonzero(flips), [0])
    assert after == pytest.approx(0.0)
    at_once = obj.massage_flips(p, action, repay, group, 0.2, 0.3)
    gap_at_once = obj.cohort_tpr_gap((action ^ at_once)[None], repay[None], group[None])[0]
    assert abs(gap_at_once) > 0.2  # the old rule's overshoot
    # a group with no would-repay member: its TPR reads 0, no division by zero
    assert not obj.massage_cohort(p, action, repay & (group == 0), group, 0.3)[5:].any()


# -------------------------------------------------------------------------- ELBERT-PO
def test_elbert_advantage_hand_and_sign():
    adv = np.array([0.0, 0.0])
    eta_s = np.array([4.0, 1.0])  # z = [0.5, 0.25]: group 0 advantaged, b = 0.25
    eta_d = np.array([8.0, 4.0])
    adv_s = np.array([[0.0, 0.0], [1.0, 0.0]])  # sample 0: more supply for group 1
    adv_d = np.zeros((2, 2))
    out = obj.elbert_advantage(adv, adv_s, adv_d, eta_s, eta_d, alpha=2.0)
    # dh/dz = [+0.5, -0.5]; term_0 = -0.5 * (1 / 4) -> A_fair = -2 * (-0.125) = 0.25
    np.testing.assert_allclose(out, [0.25, 0.0])
    # more demand for the disadvantaged group lowers its z_1 = S/D and widens the gap,
    # so it must score lower
    adv_d2 = np.array([[0.0, 0.0], [1.0, 0.0]])
    out2 = obj.elbert_advantage(adv, np.zeros((2, 2)), adv_d2, eta_s, eta_d, alpha=2.0)
    assert out2[0] < 0
