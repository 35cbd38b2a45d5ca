"""The exact engine's forward pass in torch: utility, C, DPE, IPE, SPE and Lambda as
differentiable functions of a policy table (method.md sections 2-4).

:func:`exact_metrics` computes, for a tabular model and a policy table given as a torch
tensor, the same numbers as :func:`causalfair.effects.decompose` (float64, equal to
about 1e-12; the tests hold it to 1e-9), with gradients through the table, so a
policy can be optimised on the exact objective and constraints with no sampling noise
(:mod:`causalfair.repair`). The table is

- two actions with baseline d0: pi(d1 | x, s) as (G, K), or (T, G, K) time-indexed;
- otherwise action distributions (G, K, A) or (T, G, K, A).

Lambda uses the visitation weights P(x | s) = mean over t < T of mu_t (the audit's
default; ``weights="initial"`` for the initial distribution). With more than two groups
the pair is the audit's: the groups with the largest and the smallest V^pi (chosen on
the current values, so the gap is the largest pairwise gap).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair._validation import check_horizon
from causalfair.model import ModelError, TabularModel

__all__ = ["exact_metrics", "METRIC_NAMES"]

#: The quantities :func:`exact_metrics` returns as scalars.
METRIC_NAMES = ("utility", "C", "DPE", "IPE", "SPE", "Lambda")


def _action_dists(model: TabularModel, p: Any, T: int) -> Any:
    """(T, G, K, A) action distributions from any accepted table shape."""
    import torch

    G, K, A = model.n_groups, model.n_levels, model.n_actions
    if not isinstance(p, torch.Tensor):
        raise ModelError(f"policy: expected a torch tensor, got {type(p).__name__}.")
    p = p.to(torch.float64)
    if A == 2 and p.shape[-2:] == (G, K) and p.ndim in (2, 3):
        p = torch.stack([1.0 - p, p], dim=-1)
    if p.ndim not in (3, 4) or tuple(p.shape[-3:]) != (G, K, A):
        want = f"({G}, {K}) or (T, {G}, {K})" if A == 2 else f"({G}, {K}, {A}) or (T, {G}, {K}, {A})"
        raise ModelError(f"policy: table has shape {tuple(p.shape)}; expected {want}.")
    if p.ndim == 4:
        if p.shape[0] < T:
            raise ModelError(f"policy: time-indexed table covers {p.shape[0]} epochs, horizon is {T}.")
        return p[:T], True
    return p.unsqueeze(0).expand(T, G, K, A), False


def exact_metrics(model: TabularModel, p: Any, horizon: int, *, gamma: float = 1.0,
                  eps: float = 0.1, weights: str = "visitation",
                  pair: tuple[int, int] | None = None) -> dict[str, Any]:
    """Exact metrics of policy table ``p`` (a torch tensor) on ``model``.

    Returns torch scalars ``utility`` (population-weighted), ``C``, ``DPE``, ``IPE``,
    ``SPE``, ``Lambda``, tensors ``V``, ``V_ps``, ``V_0``, ``utility_by_group`` (G,),
    ``mu`` (T+1, G, K) and the ``pair`` used. Differentiable with respect to ``p``.
    """
    import torch

    from causalfair.benefit import _check_eps

    T = check_horizon(horizon)
    eps = _check_eps(eps)
    if weights not in ("visitation", "initial"):
        raise ModelError(f"weights: unknown value {weights!r}; allowed values: visitation, initial.")
    if not (isinstance(gamma, (int, float)) and 0.0 < gamma <= 1.0):
        raise ModelError(f"gamma: must be a number in (0, 1], got {gamma!r}.")
    pa, timed = _action_dists(model, p, T)
    f64 = torch.float64

    def tensor(a: Any) -> Any:
        return torch.tensor(np.array(a, dtype=np.float64))  # a copy: model arrays are read-only

    P = tensor(model.kernel)  # (G, A, K, K)
    h = tensor(model.expected_gain())  # (G, A, K)
    r = tensor(model.reward)  # (G, A, K)
    b = model.baseline
    disc = tensor(gamma ** np.arange(T))

    mu = [tensor(model.initial)]
    for t in range(T):
        k_t = torch.einsum("sxa,saxy->sxy", pa[t], P)
        mu.append(torch.einsum("sx,sxy->sy", mu[-1], k_t))
    mu_t = torch.stack(mu)  # (T+1, G, K)
    nu = torch.as_tensor(model.propagate(model.baseline_table(), T), dtype=f64)

    h_pi = torch.einsum("tsxa,sax->tsx", pa, h)
    h0 = h[:, b]
    V = (disc[:, None] * (mu_t[:T] * h_pi).sum(-1)).sum(0)
    V_ps = (disc[:, None] * torch.einsum("tsx,sx->ts", mu_t[:T], h0)).sum(0)
    V_0 = (disc[:, None] * torch.einsum("tsx,sx->ts", nu[:T], h0)).sum(0)
    r_pi = torch.einsum("tsxa,sax->tsx", pa, r)
    util_g = (disc[:, None] * (mu_t[:T] * r_pi).sum(-1)).sum(0)
    w_groups = tensor(model.group_weights)

    if pair is None:
        vals = V.detach().numpy()
        a, c = (0, 1) if model.n_groups == 2 else (int(np.argmax(vals)), int(np.argmin(vals)))
    else:
        a, c = (int(i) for i in pair)

    # Lambda: eps TV(pi(.|x,a), pi(.|x',c)) / (eps + max_a |Delta_a(x,a) - Delta_a(x',c)|)
    if timed:
        occ = mu_t[:T].unsqueeze(-1)  # (T, G, K, 1)
        mass = occ.sum(0)
        avg = (occ * pa).sum(0) / torch.where(mass > 0, mass, torch.ones_like(mass))
        p_bar = torch.where(mass > 0, avg, pa[0])
    else:
        p_bar = pa[0]
    wts = mu_t[:T].mean(0) if weights == "visitation" else tensor(model.initial)
    delta = h - h[:, b : b + 1]  # (G, A, K)
    dd = (delta[a].T[:, None, :] - delta[c].T[None, :, :]).abs().amax(-1)  # (K, K)
    tv = 0.5 * (p_bar[a][:, None, :] - p_bar[c][None, :, :]).abs().sum(-1)
    lam = (eps * tv / (eps + dd) * wts[a][:, None] * wts[c][None, :]).sum()

    C = V[a] - V[c]
    DPE = (V - V_ps)[a] - (V - V_ps)[c]
    IPE = (V_ps - V_0)[a] - (V_ps - V_0)[c]
    SPE = V_0[a] - V_0[c]
    return {
        "utility": (w_groups * util_g).sum(), "C": C, "DPE": DPE, "IPE": IPE, "SPE": SPE,
        "Lambda": lam, "V": V, "V_ps": V_ps, "V_0": V_0, "utility_by_group": util_g,
        "mu": mu_t, "pair": (a, c),
    }
