"""Wen, Bastani and Topcu's fair linear program (AISTATS 2021, Algorithm 1) and a small
discretised version of their loan MDP: the published exact method causalfair compares
with (docs/frontier.md, "Wen et al.'s results, as tests").

:func:`wen_lp` maximises the discounted reward of a finite separable MDP over stationary
policies, through their discounted occupancy lambda[s, a], subject to eps-demographic
parity between every pair of groups; :func:`wen_evaluate` evaluates any stationary policy
by a linear solve, independently of the LP; :func:`loan_belief_mdp` builds the loan MDP.
The finite-horizon, undiscounted extension that the causal decomposition needs is
:mod:`causalfair.engines.frontier`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from causalfair.engines.occupancy import (
    UNVISITED_MASS,
    InfeasibleError,
    check_eps_value,
    highs_linprog,
    lp_status_error,
)
from causalfair.model import ModelError

__all__ = ["LoanMDP", "WenLPResult", "loan_belief_mdp", "wen_evaluate", "wen_lp"]


@dataclass(frozen=True, eq=False)
class WenLPResult:
    """Solution of Wen et al.'s Algorithm 1 LP.

    ``objective``: (1 - gamma)^-1 sum lambda R (= E sum_t gamma^t R).
    ``policy``: pi[s, a] (unvisited states: uniform, Wen's fair exploration policy).
    ``occupancy``: lambda[s, a] (sums to 1). ``rho``: rho_z per group; ``gap``: largest
    pairwise |rho_a - rho_b|.
    """

    status: str
    objective: float
    policy: np.ndarray
    occupancy: np.ndarray
    rho: np.ndarray
    gap: float
    message: str


def _wen_inputs(P: Any, R: Any, D: Any, rho: Any, groups: Any, gamma: Any,
                ) -> tuple[np.ndarray, ...]:
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 3 or P.shape[0] != P.shape[2]:
        raise ModelError(f"P: expected shape (S, A, S), got {P.shape}.")
    S, A, _ = P.shape
    if (P < 0).any() or np.abs(P.sum(-1) - 1).max() > 1e-9:
        raise ModelError("P: every P[s, a, :] must be a probability distribution.")
    R = np.asarray(R, dtype=np.float64)
    if R.shape != (S, A):
        raise ModelError(f"R: expected shape {(S, A)}, got {R.shape}.")
    D = np.asarray(D, dtype=np.float64)
    if D.shape != (S,) or (D < 0).any() or abs(D.sum() - 1) > 1e-9:
        raise ModelError(f"D: expected a distribution of shape ({S},).")
    rho = np.asarray(rho, dtype=np.float64)
    if rho.ndim == 1:
        rho = np.broadcast_to(rho[:, None], (S, A))
    if rho.shape != (S, A):
        raise ModelError(f"rho: expected shape ({S}, {A}) or ({S},), got {rho.shape}.")
    g = np.asarray(groups)
    if g.shape != (S,) or not np.issubdtype(g.dtype, np.integer) or (g < 0).any():
        raise ModelError(f"groups: expected non-negative integer labels of shape ({S},).")
    if not (isinstance(gamma, (int, float)) and 0.0 < gamma < 1.0):
        raise ModelError(f"gamma: must be in (0, 1), got {gamma!r}.")
    s_, a_, t_ = np.nonzero(P)
    cross = g[s_] != g[t_]
    if cross.any():
        i = int(np.argmax(cross))
        raise ModelError(
            f"P: the MDP is not separable: P[{s_[i]}, {a_[i]}, {t_[i]}] > 0 moves group "
            f"{g[s_[i]]} to group {g[t_[i]]}; Wen's LP needs the group to be constant."
        )
    labels = np.unique(g)
    p_z = np.array([D[g == z].sum() for z in labels])
    if (p_z <= 0).any():
        z = labels[int(np.argmin(p_z))]
        raise ModelError(f"D: group {z} has no initial mass; its rho is undefined.")
    return P, R, D, rho, g, labels, p_z


def wen_evaluate(P: Any, R: Any, D: Any, rho: Any, groups: Any, gamma: float,
                 policy: Any) -> dict[str, Any]:
    """Exact evaluation of a stationary policy pi[s, a] in Wen et al.'s discounted setting,
    by a linear solve (independent of the LP): objective, rho per group, gap, occupancy."""
    P, R, D, rho, g, labels, p_z = _wen_inputs(P, R, D, rho, groups, gamma)
    pi = np.asarray(policy, dtype=np.float64)
    S, A, _ = P.shape
    if pi.shape != (S, A) or (pi < -1e-12).any() or np.abs(pi.sum(-1) - 1).max() > 1e-9:
        raise ModelError(f"policy: expected a stochastic matrix of shape ({S}, {A}).")
    P_pi = np.einsum("sa,sat->st", pi, P)
    d = (1 - gamma) * np.linalg.solve(np.eye(S) - gamma * P_pi.T, D)
    lam = d[:, None] * pi
    rz = np.array([(lam[g == z] * rho[g == z]).sum() / pz for z, pz in zip(labels, p_z, strict=True)])
    return {
        "objective": float((lam * R).sum() / (1 - gamma)),
        "rho": rz,
        "gap": float(rz.max() - rz.min()),
        "occupancy": lam,
    }


def wen_lp(P: Any, R: Any, D: Any, rho: Any, groups: Any, gamma: float, eps: float, *,
           raise_infeasible: bool = True) -> WenLPResult:
    """Wen, Bastani and Topcu's Algorithm 1: the exact eps-demographic-parity optimum of a
    finite separable MDP with discounted occupancy.

    ``P[s, a, s']``, ``R[s, a]`` (decision maker), ``D[s]`` (initial distribution),
    ``rho[s, a]`` or ``rho[s]`` (individual reward), ``groups[s]`` (integer subpopulation
    of each state; the MDP must never move between groups), ``gamma`` in (0, 1),
    ``eps`` >= 0 (``math.inf`` = unconstrained). Every pairwise
    |rho_a - rho_b| <= eps, rho_z = p_z^-1 sum_{s in z, a} lambda rho.
    """
    P, R, D, rho, g, labels, p_z = _wen_inputs(P, R, D, rho, groups, gamma)
    eps = check_eps_value("DP", eps)
    S, A, _ = P.shape
    n = S * A
    # sum_a lam[s', a] - gamma sum_{s,a} lam[s, a] P[s, a, s'] = (1 - gamma) D[s']
    E = sp.csr_matrix((np.ones(n), (np.repeat(np.arange(S), A), np.arange(n))), shape=(S, n))
    A_eq = (E - gamma * sp.csr_matrix(P.reshape(n, S)).T).tocsr()
    b_eq = (1 - gamma) * D
    Z = len(labels)
    rows = np.zeros((Z, n))
    for i, (z, pz) in enumerate(zip(labels, p_z, strict=True)):
        mask = np.repeat(g == z, A)
        rows[i, mask] = rho.reshape(-1)[mask] / pz
    kwargs: dict[str, Any] = {}
    if math.isfinite(eps) and Z > 1:
        diff = np.array([rows[a] - rows[b] for a in range(Z) for b in range(a + 1, Z)])
        kwargs = {"A_ub": sp.csr_matrix(np.vstack([diff, -diff])),
                  "b_ub": np.full(2 * len(diff), eps)}
    res = highs_linprog(c=-R.reshape(-1) / (1 - gamma), A_eq=A_eq, b_eq=b_eq, bounds=(0, None), **kwargs)
    if res.status == 2:
        msg = (f"no policy satisfies eps-demographic parity |rho_a - rho_b| <= {eps:g} on this "
               f"MDP (gamma = {gamma:g}); Wen et al.'s LP is infeasible.")
        if raise_infeasible:
            raise InfeasibleError(msg)
        nan = np.full((S, A), np.nan)
        return WenLPResult("infeasible", math.nan, nan, nan, np.full(Z, np.nan), math.nan, msg)
    if res.status != 0:
        raise lp_status_error(res, "Wen's LP")
    lam = np.clip(res.x, 0.0, None).reshape(S, A)
    mass = lam.sum(-1, keepdims=True)
    pi = np.where(mass > UNVISITED_MASS, lam / np.where(mass > 0, mass, 1.0), 1.0 / A)
    rz = rows @ lam.reshape(-1)
    return WenLPResult("optimal", float(-res.fun), pi, lam, rz, float(rz.max() - rz.min()),
                       str(res.message))


# ---------------------------------------------------------------- small loan MDP
@dataclass(frozen=True, eq=False)
class LoanMDP:
    """A discretised, thresholded belief loan MDP (Wen et al. section 2, App. G).

    Arrays in Wen's notation: ``P`` (S, 2, S), ``R`` (S, 2), ``D`` (S,), ``rho`` (S, 2)
    with rho = 1[a = 1] (demographic parity = equal offer rates), ``groups`` (S,)
    (0 = majority, 1 = minority), ``states`` (S, 3) = (group, alpha, beta), ``gamma``.
    """

    P: np.ndarray
    R: np.ndarray
    D: np.ndarray
    rho: np.ndarray
    groups: np.ndarray
    states: np.ndarray
    gamma: float

    def lp(self, eps: float, **kwargs: Any) -> WenLPResult:
        return wen_lp(self.P, self.R, self.D, self.rho, self.groups, self.gamma, eps, **kwargs)

    def evaluate(self, policy: Any) -> dict[str, Any]:
        return wen_evaluate(self.P, self.R, self.D, self.rho, self.groups, self.gamma, policy)


def loan_belief_mdp(*, interest: float = 0.17318629, p_minority: float = 0.29294318,
                    prior_majority: tuple[float, float] = (0.65338681, 0.20783559),
                    prior_minority: tuple[float, float] = (0.48824268, 0.48346869),
                    history: tuple[int, int] = (4, 2), risk_aversion: float = 0.01,
                    tau: float = 0.5, cap: int = 8, gamma: float = 0.8) -> LoanMDP:
    """Wen et al.'s loan MDP on a finite lattice.

    State (z, alpha, beta): alpha = alpha_z + i (i = 0..cap repaid loans), beta = beta_z +
    j * tau (j = 0..cap/tau; a default adds 1/tau units, a denial one unit, Wen's beta +=
    tau). Counts are thresholded at the cap (a move past it stays at the cap). Offer:
    repay w.p. alpha / (alpha + beta). Bank reward of an offer (code form, without the
    constant +2 offset): (I + 1) p - 1 - lambda (I + 1) sd, p and sd the mean and standard
    deviation of Beta(alpha, beta); 0 for a denial. Initial states: the prior (alpha_z,
    beta_z) (App. G values) after ``history[z]`` forced offers (paper: 10 and 7; smaller
    here to keep the lattice small). Group weights: 1 - p_minority and p_minority.
    """
    units = 1.0 / tau
    if abs(units - round(units)) > 1e-9 or units < 1:
        raise ModelError(f"tau: 1 / tau must be a positive integer, got tau = {tau!r}.")
    units = int(round(units))
    nb = cap * units
    na = cap
    G = 2
    per = (na + 1) * (nb + 1)
    S = G * per

    def sid(z: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return z * per + np.minimum(i, na) * (nb + 1) + np.minimum(j, nb)

    P = np.zeros((S, 2, S))
    R = np.zeros((S, 2))
    states = np.zeros((S, 3))
    for z, (a0, b0) in enumerate((prior_majority, prior_minority)):
        i, j = np.meshgrid(np.arange(na + 1), np.arange(nb + 1), indexing="ij")
        i, j = i.reshape(-1), j.reshape(-1)
        s = sid(z, i, j)
        alpha, beta = a0 + i, b0 + j * tau
        p = alpha / (alpha + beta)
        sd = np.sqrt(alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1)))
        states[s] = np.stack([np.full(i.shape, z), alpha, beta], axis=1)
        np.add.at(P, (s, 0, sid(z, i, j + 1)), 1.0)
        np.add.at(P, (s, 1, sid(z, i + 1, j)), p)
        np.add.at(P, (s, 1, sid(z, i, j + units)), 1.0 - p)
        R[s, 1] = (interest + 1.0) * p - 1.0 - risk_aversion * (interest + 1.0) * sd
    D = np.zeros(S)
    for z, w in enumerate((1.0 - p_minority, p_minority)):
        d = np.zeros(S)
        d[z * per] = 1.0
        for _ in range(int(history[z])):
            d = d @ P[:, 1, :]
        D += w * d
    rho = np.zeros((S, 2))
    rho[:, 1] = 1.0
    groups = np.repeat(np.arange(G), per)
    return LoanMDP(P=P, R=R, D=D, rho=rho, groups=groups, states=states, gamma=float(gamma))
