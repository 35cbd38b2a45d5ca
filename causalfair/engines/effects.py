"""Decomposition of the qualification-gain disparity (method.md sections 2-3).

For a deployed policy pi, groups s+ and s- and horizon T (undiscounted by default):

    V^pi_s  = E[ sum_{t<T} g^s(x_t, x_{t+1}) ],  x_0 ~ P(x_0 | s), x under do(pi, s)
    V^PS_s  = E[ sum_{t<T} h0(x_t, s) ],          x under pi (path-specific pi^PS)
    V^pi0_s = E[ sum_{t<T} h0(x_t, s) ],          x under pi0 (always d0)

    C   = V^pi_{s+} - V^pi_{s-}
    DPE = (V^pi - V^PS)_{s+} - (V^pi - V^PS)_{s-}       direct effect
    IPE = (V^PS - V^pi0)_{s+} - (V^PS - V^pi0)_{s-}     indirect (delayed) effect
    SPE = V^pi0_{s+} - V^pi0_{s-}                        spurious effect

The exact engine (:func:`decompose`) propagates state distributions forward (for the
estimates and per-step curves) and value functions backward (an independent second
computation); the identities of method.md are checked between the two and reported
as diagnostics. With more than two groups, C and its parts are computed for one pair
of groups: by default the pair with the largest and the smallest V^pi, so that C is
the largest pairwise gap (and still equals DPE + IPE + SPE).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair._limits import check_memory
from causalfair._validation import check_gamma, check_horizon, check_keywords
from causalfair.engines.benefit import lambda_metric
from causalfair.model import ModelError, TabularModel
from causalfair.policies.core import Policy
from causalfair.policies.grid import check_policy_table, policy_table
from causalfair.results import Decomposition, check_pair

__all__ = [
    "decompose",
    "value_tables",
    "check_horizon",
]


# ----------------------------------------------------------------------- exact engine
def _as_time_table(p: np.ndarray, horizon: int) -> np.ndarray:
    return p if p.ndim == 3 else np.broadcast_to(p, (horizon, *p.shape))


def _value_tables_general(model: TabularModel, p: np.ndarray, T: int,
                          gamma: float) -> dict[str, np.ndarray]:
    """Backward recursion for A actions and any baseline (``p``: action distributions)."""
    pa = model.action_table(p)
    pt = pa if pa.ndim == 4 else np.broadcast_to(pa, (T, *pa.shape))
    G, K, A = model.n_groups, model.n_levels, model.n_actions
    h = model.expected_gain()  # (G, A, K)
    b = model.baseline
    P = model.kernel  # (G, A, K, K)
    V_pi = np.zeros((T + 1, G, K))
    V_ps = np.zeros((T + 1, G, K))
    V_0 = np.zeros((T + 1, G, K))
    Q_pi = np.zeros((T, G, A, K))
    for t in range(T - 1, -1, -1):
        Q_pi[t] = h + gamma * np.einsum("saxy,sy->sax", P, V_pi[t + 1])
        V_pi[t] = np.einsum("sxa,sax->sx", pt[t], Q_pi[t])
        cont_ps = np.einsum("saxy,sy->sax", P, V_ps[t + 1])
        V_ps[t] = h[:, b] + gamma * np.einsum("sxa,sax->sx", pt[t], cont_ps)
        V_0[t] = h[:, b] + gamma * np.einsum("sxy,sy->sx", P[:, b], V_0[t + 1])
    return {"V_pi": V_pi, "V_ps": V_ps, "V_0": V_0, "Q_pi": Q_pi}


@check_keywords
def value_tables(model: TabularModel, policy: Policy | np.ndarray, horizon: int,
                 gamma: float = 1.0) -> dict[str, np.ndarray]:
    """Backward recursion for the gain value functions of pi, pi^PS and pi0.

    Returns arrays indexed [t, s, x]: ``V_pi``, ``V_ps``, ``V_0`` (t = 0..T, zero at T)
    and ``Q_pi`` [t, s, d, x], the gain action value under pi (the Q_g of PPO-C).
    """
    T = check_horizon(horizon)
    gamma = check_gamma(gamma)
    check_memory(8.0 * (T + 1) * model.n_groups * model.n_levels * (3 + 2 * model.n_actions),
                 f"value tables over {T} epochs", "use a shorter horizon")
    p = policy_table(policy, model, T)
    if not model.binary:
        return _value_tables_general(model, p, T, gamma)
    pt = _as_time_table(p, T)
    G, K = model.n_groups, model.n_levels
    h = model.expected_gain()  # (G, 2, K)
    P0, P1 = model.kernel[:, 0], model.kernel[:, 1]
    V_pi = np.zeros((T + 1, G, K))
    V_ps = np.zeros((T + 1, G, K))
    V_0 = np.zeros((T + 1, G, K))
    Q_pi = np.zeros((T, G, 2, K))
    for t in range(T - 1, -1, -1):
        # Q(x, d) = h_d(x) + gamma * sum_x' P(x'|x,d) V(x')
        cont0 = np.matmul(P0, V_pi[t + 1][..., None])[..., 0]
        cont1 = np.matmul(P1, V_pi[t + 1][..., None])[..., 0]
        Q_pi[t, :, 0] = h[:, 0] + gamma * cont0
        Q_pi[t, :, 1] = h[:, 1] + gamma * cont1
        V_pi[t] = Q_pi[t, :, 0] + pt[t] * (Q_pi[t, :, 1] - Q_pi[t, :, 0])
        ps0 = np.matmul(P0, V_ps[t + 1][..., None])[..., 0]
        ps1 = np.matmul(P1, V_ps[t + 1][..., None])[..., 0]
        V_ps[t] = h[:, 0] + gamma * (ps0 + pt[t] * (ps1 - ps0))
        V_0[t] = h[:, 0] + gamma * np.matmul(P0, V_0[t + 1][..., None])[..., 0]
    return {"V_pi": V_pi, "V_ps": V_ps, "V_0": V_0, "Q_pi": Q_pi}


def decompose(
    model: TabularModel,
    policy: Policy | np.ndarray,
    horizon: int = 20,
    *,
    gamma: float = 1.0,
    pair: tuple[int, int] | None = None,
    eps: float | str | None = None,
    weights: str = "visitation",
    policy_name: str | None = None,
) -> Decomposition:
    """Exact decomposition C = DPE + IPE + SPE of a policy on a tabular model, with
    Lambda (benefit fairness, method.md section 4, with ``eps`` and ``weights``:
    "visitation" or "initial").

    ``policy`` is a :class:`~causalfair.policies.core.Policy` or a table pi(d1 | x, s) of shape
    (G, K) or (T, G, K). :func:`causalfair.decompose` chooses between this engine and
    Monte Carlo from what a system supports.
    """
    if not isinstance(model, TabularModel):
        raise ModelError(f"model: expected a TabularModel, got {type(model).__name__}; for a "
                         "system use causalfair.decompose, which picks the engine it supports.")
    T = check_horizon(horizon)

    check_memory(8.0 * (T + 1) * model.n_groups * model.n_levels * model.n_actions * 12,
                 f"exact engine over {T} epochs", "use a shorter horizon")
    gamma = check_gamma(gamma)
    if isinstance(policy, np.ndarray):
        p = check_policy_table(model, policy, horizon=T)
        name = "table" if policy_name is None else policy_name
    else:
        p = policy_table(policy, model, T)
        name = (getattr(policy, "name", type(policy).__name__) if policy_name is None
                else policy_name)
    if not model.binary:
        return _decompose_general(model, p, T, gamma, pair, eps, weights, name)
    pt = _as_time_table(p, T)
    disc = gamma ** np.arange(T)

    h = model.expected_gain()
    h0 = h[:, 0]
    delta = h[:, 1] - h0
    mu = model.propagate(p, T)  # (T+1, G, K) under pi
    nu = model.propagate(0.0, T)  # under pi0
    h_pi = h0 + pt * delta  # (T, G, K)
    step_pi = disc[:, None] * np.einsum("tsx,tsx->ts", mu[:T], h_pi)
    step_ps = disc[:, None] * np.einsum("tsx,sx->ts", mu[:T], h0)
    step_0 = disc[:, None] * np.einsum("tsx,sx->ts", nu[:T], h0)
    r = model.reward
    r_pi = r[:, 0] + pt * (r[:, 1] - r[:, 0])
    utility = (disc[:, None] * np.einsum("tsx,tsx->ts", mu[:T], r_pi)).sum(0)

    # Independent backward computation and the identities of method.md.
    vt = value_tables(model, p, T, gamma)
    prop_direct = (disc[:, None] * np.einsum("tsx,tsx->ts", mu[:T], pt * delta)).sum(0)
    prop_indirect = (disc[:, None] * np.einsum("tsx,sx->ts", mu[:T] - nu[:T], h0)).sum(0)
    return _result(model, p, T, gamma, pair, eps, weights, name, mu, vt, prop_direct,
                   prop_indirect, (step_pi, step_ps, step_0), utility)


def _result(model: TabularModel, p: np.ndarray, T: int, gamma: float, pair: Any, eps: float,
            weights: str, name: str, mu: np.ndarray, vt: dict[str, np.ndarray],
            prop_direct: np.ndarray, prop_indirect: np.ndarray,
            steps: tuple[np.ndarray, np.ndarray, np.ndarray], utility: np.ndarray
            ) -> Decomposition:
    """The exact :class:`Decomposition` from the forward pass (per-step gains), the
    backward value tables, Proposition 1's two sides and Lambda."""
    step_pi, step_ps, step_0 = steps
    V, V_ps, V_0 = step_pi.sum(0), step_ps.sum(0), step_0.sum(0)
    ab = check_pair(pair, model.n_groups, V)
    diagnostics = _diagnostics(model, V, V_ps, V_0, vt, prop_direct, prop_indirect, mu, ab,
                               gamma, T)
    lam = lambda_metric(model, p, horizon=T, eps=eps, weights=weights, pair=ab, mu=mu)
    return Decomposition(
        engine="exact",
        groups=tuple(model.group_names),
        pair=ab,
        horizon=T,
        gamma=float(gamma),
        V=V,
        V_ps=V_ps,
        V_0=V_0,
        steps=np.stack([step_pi.T, step_ps.T, step_0.T]),
        utility_by_group=utility,
        group_weights=model.group_weights,
        Lambda=float(lam),
        Lambda_ci=(float(lam), float(lam)),
        diagnostics=diagnostics,
        policy_name=name,
        model_name=model.name,
    )


def _diagnostics(model: TabularModel, V: np.ndarray, V_ps: np.ndarray, V_0: np.ndarray,
                 vt: dict[str, np.ndarray], prop_direct: np.ndarray, prop_indirect: np.ndarray,
                 mu: np.ndarray, ab: tuple[int, int], gamma: float, T: int) -> dict[str, float]:
    Vb = np.einsum("sx,sx->s", model.initial, vt["V_pi"][0])
    Vb_ps = np.einsum("sx,sx->s", model.initial, vt["V_ps"][0])
    Vb_0 = np.einsum("sx,sx->s", model.initial, vt["V_0"][0])
    scale = max(1.0, float(np.abs(np.concatenate([V, V_ps, V_0])).max()))
    C = V[ab[0]] - V[ab[1]]
    parts = ((V - V_ps) + (V_ps - V_0) + V_0)
    out = {
        "C = DPE + IPE + SPE": float(abs(C - (parts[ab[0]] - parts[ab[1]]))) / scale,
        "proposition 1 (direct)": float(np.abs((Vb - Vb_ps) - prop_direct).max()) / scale,
        "proposition 1 (indirect)": float(np.abs((Vb_ps - Vb_0) - prop_indirect).max()) / scale,
        "forward = backward": float(
            np.abs(np.concatenate([V - Vb, V_ps - Vb_ps, V_0 - Vb_0])).max()
        ) / scale,
    }
    if gamma == 1.0:
        f = model.potential
        tele = np.einsum("sx,sx->s", mu[T], f) - np.einsum("sx,sx->s", mu[0], f)
        out["telescoping"] = float(np.abs(Vb - tele).max()) / scale
    return out


def _decompose_general(model: TabularModel, p: np.ndarray, T: int, gamma: float,
                       pair: Any, eps: float, weights: str, name: str) -> Decomposition:
    """The exact engine for A actions and any baseline action a0 (method.md section 3
    with d0 replaced by a0): Proposition 1 reads V^pi - V^PS = sum_t E[sum_a pi(a|x) Delta_a(x)]
    with Delta_a = h_a - h_{a0}."""
    pa = model.action_table(p)
    pt = pa if pa.ndim == 4 else np.broadcast_to(pa, (T, *pa.shape))
    disc = gamma ** np.arange(T)
    h = model.expected_gain()  # (G, A, K)
    b = model.baseline
    h0 = h[:, b]
    delta = h - h0[:, None]  # (G, A, K)
    mu = model.propagate(p, T)
    nu = model.propagate(model.baseline_table(), T)
    h_pi = np.einsum("tsxa,sax->tsx", pt, h)
    step_pi = disc[:, None] * np.einsum("tsx,tsx->ts", mu[:T], h_pi)
    step_ps = disc[:, None] * np.einsum("tsx,sx->ts", mu[:T], h0)
    step_0 = disc[:, None] * np.einsum("tsx,sx->ts", nu[:T], h0)
    r_pi = np.einsum("tsxa,sax->tsx", pt, model.reward)
    utility = (disc[:, None] * np.einsum("tsx,tsx->ts", mu[:T], r_pi)).sum(0)
    vt = _value_tables_general(model, p, T, gamma)
    direct_t = np.einsum("tsxa,sax->tsx", pt, delta)
    prop_direct = (disc[:, None] * np.einsum("tsx,tsx->ts", mu[:T], direct_t)).sum(0)
    prop_indirect = (disc[:, None] * np.einsum("tsx,sx->ts", mu[:T] - nu[:T], h0)).sum(0)
    return _result(model, p, T, gamma, pair, eps, weights, name, mu, vt, prop_direct,
                   prop_indirect, (step_pi, step_ps, step_0), utility)
