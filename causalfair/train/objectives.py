"""The objectives of the trainer, as small pure functions (each tested on its own).

The core loop (:mod:`causalfair.train.core`) minimises

    loss = pg_loss + kl_penalty + fairness_penalty + vf_coef * v_loss

with ``pg_loss = -mean(ratio * A)`` (or the clipped surrogate). The objectives change it
in one of two places:

- a **penalty** on the surrogate (``ppo-c``: ``beta_C * C_hat^2``; ``ppo-cb``: plus
  ``beta_Lambda * Lambda``), differentiable through pi_theta;
- the **advantage** (``a-ppo``, ``f-ppo-l``, ``f-ppo``, ``elbert-po``), as the anchors do;
  ``f-ppo`` also massages the sampled actions (:func:`massage_flips`).

``ppo`` uses neither. Tensors are torch; signal helpers computed once per rollout are numpy.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "c_hat",
    "c_hat_anchored",
    "ppo_c_penalty",
    "lambda_torch",
    "batch_visitation",
    "minmax",
    "running_tpr_gap",
    "loo_tpr_gap",
    "appo_advantage",
    "cohort_tpr_gap",
    "w1_change",
    "fppol_advantage",
    "massage_tau",
    "massage_flips",
    "massage_cohort",
    "elbert_advantage",
    "rate_gap",
    "soft_bias",
    "gain_to_go",
]


# ----------------------------------------------------------------------------- PPO-C
def c_hat(ratio: torch.Tensor, q: torch.Tensor, group: torch.Tensor,
          pair: tuple[int, int] = (0, 1)) -> torch.Tensor:
    """C_hat = mean_{s+}[ratio * Q_g] - mean_{s-}[ratio * Q_g] (method.md section 5).

    ``group`` holds group indices; ``pair`` = (s+, s-). A group absent from the batch
    contributes 0 (its mean is taken over max(count, 1) samples)."""
    a, b = pair
    ma = (group == a).to(ratio.dtype)
    mb = (group == b).to(ratio.dtype)
    rq = ratio * q
    return (rq * ma).sum() / ma.sum().clamp_min(1.0) - (rq * mb).sum() / mb.sum().clamp_min(1.0)


def c_hat_anchored(ratio: torch.Tensor, q: torch.Tensor, group: torch.Tensor, c_batch: float,
                   scale: float, pair: tuple[int, int] = (0, 1)) -> torch.Tensor:
    """The paper's C_hat re-anchored on the batch's C:

        C_anch = c_batch + scale * (C_hat(ratio) - C_hat(ratio = 1)).

    Why: C_hat averages Q over *all* epochs, so at pi_old its value is the mean over t of
    the remaining-gain gap, not C (on lending-1 it often has the opposite sign), and its
    gradient is grad C / T. With ``scale`` = T (samples per individual) the gradient is
    the policy-gradient estimate of grad C (sum over t of grad log pi * Q_g), and the
    value at pi_old is ``c_batch``, the batch's Monte Carlo C (gap of the mean total gain
    of the groups' individuals). Same direction as the paper's estimator, right sign and
    scale for the square."""
    ones = torch.ones_like(ratio)
    return c_batch + scale * (c_hat(ratio, q, group, pair) - c_hat(ones, q, group, pair))


def ppo_c_penalty(ratio: torch.Tensor, q: torch.Tensor, group: torch.Tensor, beta_c: float,
                  pair: tuple[int, int] = (0, 1), *, c_batch: float | None = None,
                  scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(beta_C * C^2, C): the PPO-C penalty, to be *added* to the loss. C is the paper's
    C_hat (``c_batch`` None) or :func:`c_hat_anchored`."""
    if c_batch is None:
        c = c_hat(ratio, q, group, pair)
    else:
        c = c_hat_anchored(ratio, q, group, c_batch, scale, pair)
    return beta_c * c * c, c


def gain_to_go(gain: np.ndarray) -> np.ndarray:
    """Undiscounted gain-to-go along axis 0: out[t] = sum_{t' >= t} gain[t']."""
    return np.flip(np.cumsum(np.flip(gain, 0), 0), 0).copy()


# ----------------------------------------------------------------------------- PPO-Cb
def batch_visitation(level: np.ndarray, group: np.ndarray, n_groups: int,
                     n_levels: int) -> np.ndarray:
    """Empirical P(x | s) of a batch, (G, K); a group absent from the batch gets zeros."""
    counts = np.zeros((n_groups, n_levels))
    np.add.at(counts, (np.asarray(group).ravel(), np.asarray(level).ravel()), 1.0)
    tot = counts.sum(1, keepdims=True)
    return np.divide(counts, tot, out=np.zeros_like(counts), where=tot > 0)


def lambda_torch(p: torch.Tensor, delta: torch.Tensor, w: torch.Tensor, eps: float,
                 pair: tuple[int, int] = (0, 1)) -> torch.Tensor:
    """Lambda = sum_{x,x'} eps |p(x,a) - p(x',b)| / (eps + |Delta(x,a) - Delta(x',b)|) w(x,a) w(x',b),
    differentiable in ``p`` (G, K) = pi_theta(d1 | x, s) (method.md section 4)."""
    a, b = pair
    dp = (p[a][:, None] - p[b][None, :]).abs()
    dd = (delta[a][:, None] - delta[b][None, :]).abs()
    return (eps * dp / (eps + dd) * w[a][:, None] * w[b][None, :]).sum()


def lambda_cells_torch(p: torch.Tensor, delta: torch.Tensor, w: torch.Tensor, eps: float,
                       pair: tuple[int, int] = (0, 1)) -> torch.Tensor:
    """Lambda over cells with A actions (docs/decomposition.md, "Lambda with more than two
    actions"): sum eps TV(p(x, a), p(x', b)) / (eps + max_act |Delta(x, a) - Delta(x', b)|)
    w(x, a) w(x', b), differentiable in ``p`` (G, K, A); ``delta`` (G, K, A), ``w`` (G, K).
    With two actions it is :func:`lambda_torch` on p[..., 1]."""
    a, b = pair
    tv = 0.5 * (p[a][:, None, :] - p[b][None, :, :]).abs().sum(-1)
    gap = (delta[a][:, None, :] - delta[b][None, :, :]).abs().amax(-1)
    return (eps * tv / (eps + gap) * w[a][:, None] * w[b][None, :]).sum()


# ------------------------------------------------------------------------------ A-PPO
def minmax(x: np.ndarray) -> np.ndarray:
    """(x - min) / (max - min + 1e-8), the anchors' per-batch scaling of each term."""
    x = np.asarray(x, dtype=np.float64)
    return (x - x.min()) / (x.max() - x.min() + 1e-8)


def running_tpr_gap(action: np.ndarray, repay: np.ndarray, group: np.ndarray,
                    pair: tuple[int, int] = (0, 1)) -> tuple[np.ndarray, np.ndarray]:
    """TPR gap |TPR(a) - TPR(b)| over the history of a stream of applicants.

    Arrays are (L, M): L applicants in order along axis 0, M independent streams. TPR of
    a group = approved-and-would-repay / would-repay among the stream so far (0 while a
    group has no would-repay applicant, as the anchors). Returns (before, after): the
    gap before and after each applicant's decision."""
    tprs = []
    for g in pair:
        pos = ((group == g) & repay).astype(np.float64)
        tp = pos * (action > 0)
        cp, ct = np.cumsum(pos, 0), np.cumsum(tp, 0)
        tprs.append(np.divide(ct, cp, out=np.zeros_like(ct), where=cp > 0))
    after = np.abs(tprs[0] - tprs[1])
    before = np.concatenate([np.zeros_like(after[:1]), after[:-1]], 0)
    return before, after


def loo_tpr_gap(action: np.ndarray, repay: np.ndarray, group: np.ndarray,
                pair: tuple[int, int] = (0, 1)) -> tuple[np.ndarray, np.ndarray]:
    """TPR gap of the whole batch without each applicant's decision (before) and with it
    (after): each applicant is treated as the latest one of a history made of all the
    others. Unlike a running stream, every applicant's change has the same order of
    magnitude (about 1 / would-repay count), so the anchors' min-max scaling is not
    dominated by the first few applicants of a stream."""
    tot = {}
    for g in pair:
        pos = ((group == g) & repay).astype(np.float64)
        tot[g] = (pos.sum(), (pos * (action > 0)).sum())

    def rate(tp: np.ndarray, n: np.ndarray) -> np.ndarray:
        return np.divide(tp, n, out=np.zeros_like(tp), where=n > 0)

    after_r, before_r = [], []
    for g in pair:
        n, tp = tot[g]
        pos_i = ((group == g) & repay).astype(np.float64)
        tp_i = pos_i * (action > 0)
        after_r.append(np.full(action.shape, n and tp / n))
        before_r.append(rate(tp - tp_i, n - pos_i))
    return np.abs(before_r[0] - before_r[1]), np.abs(after_r[0] - after_r[1])


def appo_advantage(adv: np.ndarray, gap_state: np.ndarray, gap_change: np.ndarray,
                   beta0: float, beta1: float, beta2: float, omega: float) -> np.ndarray:
    """A-PPO (Yu et al. 2022, anchors' code):

        beta0 mm(A) + beta1 mm(min(0, omega - D_t)) + beta2 mm(min(0, -1[D_t > omega] dD)),

    ``gap_state`` = D_t, the TPR gap of the state the decision is taken in, ``gap_change``
    = dD = D_{t+1} - D_t, the change the decision causes; mm = per-batch min-max."""
    gap_state = np.asarray(gap_state, dtype=np.float64)
    vt = np.minimum(0.0, omega - gap_state)
    div = np.minimum(0.0, -(gap_state > omega).astype(np.float64) * gap_change)
    return beta0 * minmax(adv) + beta1 * minmax(vt) + beta2 * minmax(div)


# ---------------------------------------------------------------------------- F-PPO-L
def cohort_tpr_gap(action: np.ndarray, repay: np.ndarray, group: np.ndarray,
                   pair: tuple[int, int] = (0, 1)) -> np.ndarray:
    """Signed TPR(a) - TPR(b) within each cohort; arrays (T, N), one cohort per row."""
    out = []
    for g in pair:
        pos = ((group == g) & repay).astype(np.float64)
        tp = (pos * (action > 0)).sum(1)
        n = pos.sum(1)
        out.append(np.divide(tp, n, out=np.zeros_like(tp), where=n > 0))
    return out[0] - out[1]


def w1_change(level: np.ndarray, next_level: np.ndarray, group: np.ndarray, n_levels: int,
              pair: tuple[int, int] = (0, 1)) -> np.ndarray:
    """Change of W1 between the groups' level distributions caused by each individual's
    own move, all others held at the cohort's current levels.

    Arrays (T, N), one cohort per row. W1 = sum_k |CDF_a(k) - CDF_b(k)| (ordinal levels,
    unit spacing). Moving one member of group g from x to x' shifts CDF_g by -/+1/n_g
    on levels [min, max); the function returns W1(after) - W1(before) per individual."""
    a, b = pair
    T, N = level.shape
    K = n_levels
    cdf = []
    n_g = []
    for g in (a, b):
        m = group == g
        cnt = np.zeros((T, K))
        np.add.at(cnt, (np.repeat(np.arange(T), N)[m.ravel()], level.ravel()[m.ravel()]), 1.0)
        n = cnt.sum(1, keepdims=True)
        n_g.append(np.maximum(n[:, 0], 1.0))
        cdf.append(np.cumsum(cnt, 1)[:, : K - 1] / np.maximum(n, 1.0))
    D = cdf[0] - cdf[1]  # (T, K-1)
    lo = np.minimum(level, next_level)
    hi = np.maximum(level, next_level)
    up = next_level > level
    # CDF of the mover's group drops by 1/n on [lo, hi) when it moves up, rises when down.
    size = np.where(group == a, 1.0 / n_g[0][:, None], 1.0 / n_g[1][:, None])
    c = np.where(up, -size, size) * np.where(group == a, 1.0, -1.0)  # change of D
    k = np.arange(K - 1)
    inside = (k[None, None, :] >= lo[..., None]) & (k[None, None, :] < hi[..., None])
    Dt = D[:, None, :]
    inc = np.abs(Dt + c[..., None]) - np.abs(Dt)
    return (inc * inside).sum(-1)


def fppol_advantage(adv: np.ndarray, violated: np.ndarray, dw1: np.ndarray, beta0: float,
                    beta3: float, beta4: float) -> np.ndarray:
    """F-PPO-L (Hu et al. 2023, anchors' code), ``dw1`` = W1(t+1) - W1(t):
    violated branch min(0, -dW1) (penalise a W1 that does not fall), satisfied branch
    max(0, -dW1) (reward a falling W1); beta0 mm(A) + beta3 mm(long1) + beta4 mm(long2)."""
    v = np.asarray(violated, dtype=np.float64)
    long1 = np.minimum(0.0, -v * dw1)
    long2 = np.maximum(0.0, -(1.0 - v) * dw1)
    return beta0 * minmax(adv) + beta3 * minmax(long1) + beta4 * minmax(long2)


def massage_tau(iteration: int, tau_s: float, start: int, decay: float) -> float:
    """F-PPO's confidence band: 0.5 (no flips) before ``start``, then tau_s * decay^(i-start),
    floored at 0 (anchor schedule)."""
    if iteration <= start:
        return 0.5
    return max(0.0, tau_s * decay ** (iteration - start))


def massage_flips(p_d1: np.ndarray, action: np.ndarray, repay: np.ndarray, group: np.ndarray,
                  signed_gap: np.ndarray, tau: float, pair: tuple[int, int] = (0, 1)) -> np.ndarray:
    """Which sampled actions F-PPO flips (boolean, same shape as ``action``).

    A flip needs low confidence, tau <= pi(a | s) <= 1 - tau, and must make the TPR gap
    strictly smaller: approving a would-repay member of the group with the lower TPR,
    or denying one of the group with the higher TPR. ``signed_gap`` = TPR(a) - TPR(b)
    of the applicant's cohort before massaging (broadcast to ``action``)."""
    a, b = pair
    pa = np.where(action > 0, p_d1, 1.0 - p_d1)
    confident = (pa < tau) | (pa > 1.0 - tau)
    low_group = np.where(signed_gap > 0, b, np.where(signed_gap < 0, a, -1))
    high_group = np.where(signed_gap > 0, a, np.where(signed_gap < 0, b, -1))
    fairer = repay & (((group == low_group) & (action == 0)) | ((group == high_group) & (action > 0)))
    return fairer & ~confident


def massage_cohort(p_d1: np.ndarray, action: np.ndarray, repay: np.ndarray, group: np.ndarray,
                   tau: float, pair: tuple[int, int] = (0, 1)) -> np.ndarray:
    """Which sampled actions of one cohort (1-D arrays) F-PPO flips, one applicant at a time
    in the cohort's order as the anchors' stream does: a candidate of :func:`massage_flips`
    (low confidence, a flip towards the lower-TPR group) is flipped only if, after the
    flips before it, its flip still strictly lowers |TPR(a) - TPR(b)|. Deciding every flip
    against the gap before massaging (all at once) pushed the gap past zero: a cohort with a
    gap of -0.24 ended at +1.0."""
    a, b = pair
    gap = cohort_tpr_gap(action[None], repay[None], group[None], pair)[0]
    cand = np.flatnonzero(massage_flips(p_d1, action, repay, group, gap, tau, pair))
    flips = np.zeros(action.shape, dtype=bool)
    if cand.size == 0:
        return flips
    n = {g: float(((group == g) & repay).sum()) for g in pair}
    tp = {g: float(((group == g) & repay & (action > 0)).sum()) for g in pair}
    def gap_of(t: dict[int, float]) -> float:  # 0 for a group with no would-repay member
        return abs((t[a] / n[a] if n[a] else 0.0) - (t[b] / n[b] if n[b] else 0.0))

    for i in cand:  # a Python loop over the candidates only (at most the cohort)
        g = int(group[i])
        new = dict(tp)
        new[g] += -1.0 if action[i] > 0 else 1.0
        before, after = gap_of(tp), gap_of(new)
        if after < before:
            flips[i] = True
            tp = new
    return flips


# ---------------------------------- supply / demand (Xu et al. 2024, Hu et al. 2023)
def rate_gap(cum_supply: np.ndarray, cum_demand: np.ndarray) -> np.ndarray:
    """The short-term bias the papers' code computes from running totals (last axis =
    groups): max_g - min_g of supply_g / (demand_g + 1) (ELBERT's and F-PPO's A-PPO
    baselines: vaccines / (newly infected + 1), discovered / (occurred + 1))."""
    r = np.asarray(cum_supply, dtype=np.float64) / (np.asarray(cum_demand, dtype=np.float64) + 1.0)
    return r.max(axis=-1) - r.min(axis=-1)


def _softmax(v: np.ndarray) -> np.ndarray:
    e = np.exp(v - v.max())
    return e / e.sum()


def soft_bias(z: np.ndarray, beta: float) -> float:
    """ELBERT's soft bias (Eq. 6): (1/beta) log sum e^{beta z} + (1/beta) log sum e^{-beta z};
    b <= b_soft <= b + 2 log(M) / beta (Prop. 3.3)."""
    z = np.asarray(z, dtype=np.float64)
    lse = lambda v: float(v.max() + np.log(np.exp(v - v.max()).sum()))  # noqa: E731
    return (lse(beta * z) + lse(-beta * z)) / beta


# --------------------------------------------------------------------------- ELBERT-PO
def elbert_advantage(adv: np.ndarray, adv_s: np.ndarray, adv_d: np.ndarray, eta_s: np.ndarray,
                     eta_d: np.ndarray, alpha: float, beta: float | None = None) -> np.ndarray:
    """ELBERT-PO's fairness-aware advantage (Xu et al. 2024, Prop. 3.2):

        A_fair = A - alpha sum_g dh/dz_g (A^S_g / eta^D_g - eta^S_g A^D_g / (eta^D_g)^2),
        z_g = eta^S_g / eta^D_g.

    Hard bias (``beta`` None; the released code's two-group case): h = (max z - min z)^2,
    dh/dz = 2 b (+1 argmax, -1 argmin). Soft bias (``beta`` > 0; Eq. 6-7, M groups):
    b_soft = (1/beta) log sum e^{beta z} + (1/beta) log sum e^{-beta z}, h = b_soft^2,
    dh/dz_g = 2 b_soft (softmax(beta z)_g - softmax(-beta z)_g).

    ``adv_s``, ``adv_d``: (G, ...) per-group supply/demand advantages."""
    eta_s = np.asarray(eta_s, dtype=np.float64)
    eta_d = np.maximum(np.asarray(eta_d, dtype=np.float64), 1e-8)
    z = eta_s / eta_d
    if beta is None:
        b = z.max() - z.min()
        dh = np.zeros_like(z)
        dh[int(np.argmax(z))] += 2.0 * b
        dh[int(np.argmin(z))] -= 2.0 * b
    else:
        dh = 2.0 * soft_bias(z, beta) * (_softmax(beta * z) - _softmax(-beta * z))
    term = np.zeros_like(np.asarray(adv, dtype=np.float64))
    for g in range(len(z)):
        term = term + dh[g] * (adv_s[g] / eta_d[g] - eta_s[g] * adv_d[g] / eta_d[g] ** 2)
    return adv - alpha * term
