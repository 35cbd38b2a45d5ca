"""The exact engine's forward pass in torch: utility, C, DPE, IPE, SPE and Lambda as
differentiable functions of a policy table (method.md sections 2-4).

:func:`exact_metrics` computes, for a tabular model and a policy table given as a torch
tensor, the same numbers as :func:`causalfair.engines.effects.decompose` (float64, equal to
about 1e-12; the tests hold it to 1e-9), with gradients through the table, so a
policy can be optimised on the exact objective and constraints with no sampling noise
(:mod:`causalfair.train.repair`). The table is

- two actions with baseline d0: pi(d1 | x, s) as (G, K), or (T, G, K) time-indexed;
- otherwise action distributions (G, K, A) or (T, G, K, A).

Lambda uses the visitation weights P(x | s) = mean over t < T of mu_t (the audit's
default; ``weights="initial"`` for the initial distribution). With more than two groups
the pair is the audit's: the groups with the largest and the smallest V^pi (chosen on
the current values, so the gap is the largest pairwise gap).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from causalfair._validation import check_gamma, check_horizon, check_pair
from causalfair.engines.benefit import model_eps
from causalfair.model import ModelError, TabularModel

__all__ = ["exact_metrics", "exact_metrics_by_pair", "METRIC_NAMES"]

#: The quantities :func:`exact_metrics` returns as scalars.
METRIC_NAMES = ("utility", "C", "DPE", "IPE", "SPE", "Lambda")


def _action_dists(model: TabularModel, p: Any, T: int, batched: bool) -> tuple[Any, bool]:
    """(B, T, G, K, A) action distributions from any accepted table shape."""
    import torch

    G, K, A = model.n_groups, model.n_levels, model.n_actions
    if not isinstance(p, torch.Tensor):
        raise ModelError(f"policy: expected a torch tensor, got {type(p).__name__}.")
    p = p.to(torch.float64)
    if not batched:
        p = p.unsqueeze(0)
    if A == 2 and tuple(p.shape[-2:]) == (G, K) and p.ndim in (3, 4):
        p = torch.stack([1.0 - p, p], dim=-1)
    if p.ndim not in (4, 5) or tuple(p.shape[-3:]) != (G, K, A):
        want = f"({G}, {K}) or (T, {G}, {K})" if A == 2 else f"({G}, {K}, {A}) or (T, {G}, {K}, {A})"
        got = tuple(p.shape[1:]) if not batched else tuple(p.shape)
        raise ModelError(f"policy: table has shape {got}; expected {want}"
                         + (" after the batch dimension." if batched else "."))
    if p.ndim == 5:
        if p.shape[1] < T:
            raise ModelError(f"policy: time-indexed table covers {p.shape[1]} epochs, horizon is {T}.")
        return p[:, :T], True
    return p.unsqueeze(1).expand(p.shape[0], T, G, K, A), False


def _pass(model: TabularModel, p: Any, horizon: int, gamma: float, eps: float | str | None,
          weights: str, batched: bool) -> dict[str, Any]:
    """The one forward pass every pair shares: per-group ``V``, ``V_ps``, ``V_0``,
    ``utility_by_group`` (B, G), ``utility`` (B,), ``mu`` (B, T+1, G, K), and what Lambda
    reads of a pair: ``p_bar`` (B, G, K, A), ``wts`` (B, G, K), ``delta`` (G, K, A), ``eps``."""
    import torch

    T = check_horizon(horizon)
    eps, _ = model_eps(eps, model)  # None: what the model declares, else "auto" (a constant)
    if weights not in ("visitation", "initial"):
        raise ModelError(f"weights: unknown value {weights!r}; allowed values: visitation, initial.")
    gamma = check_gamma(gamma)
    pa, timed = _action_dists(model, p, T, batched)
    B = pa.shape[0]
    f64 = torch.float64

    def tensor(a: Any) -> Any:
        return torch.tensor(np.array(a, dtype=np.float64))  # a copy: model arrays are read-only

    P = tensor(model.kernel)  # (G, A, K, K)
    h = tensor(model.expected_gain())  # (G, A, K)
    r = tensor(model.reward)  # (G, A, K)
    b = model.baseline
    disc = tensor(gamma ** np.arange(T))

    mu = [tensor(model.initial).expand(B, -1, -1)]
    for t in range(T):
        k_t = torch.einsum("bsxa,saxy->bsxy", pa[:, t], P)
        mu.append(torch.einsum("bsx,bsxy->bsy", mu[-1], k_t))
    mu_t = torch.stack(mu, dim=1)  # (B, T+1, G, K)
    nu = torch.as_tensor(model.propagate(model.baseline_table(), T), dtype=f64)

    h_pi = torch.einsum("btsxa,sax->btsx", pa, h)
    h0 = h[:, b]
    V = (disc[:, None] * (mu_t[:, :T] * h_pi).sum(-1)).sum(1)  # (B, G)
    V_ps = (disc[:, None] * torch.einsum("btsx,sx->bts", mu_t[:, :T], h0)).sum(1)
    V_0 = (disc[:, None] * torch.einsum("tsx,sx->ts", nu[:T], h0)).sum(0).expand(B, -1)
    r_pi = torch.einsum("btsxa,sax->btsx", pa, r)
    util_g = (disc[:, None] * (mu_t[:, :T] * r_pi).sum(-1)).sum(1)  # (B, G)
    w_groups = tensor(model.group_weights)

    if timed:
        occ = mu_t[:, :T].unsqueeze(-1)  # (B, T, G, K, 1)
        mass = occ.sum(1)
        avg = (occ * pa).sum(1) / torch.where(mass > 0, mass, torch.ones_like(mass))
        p_bar = torch.where(mass > 0, avg, pa[:, 0])
    else:
        p_bar = pa[:, 0]  # (B, G, K, A)
    wts = mu_t[:, :T].mean(1) if weights == "visitation" else tensor(model.initial).expand(B, -1, -1)
    if model.departed_levels:  # P(x | s) over those present (benefit.present_weights)
        here = torch.ones(model.n_levels, dtype=f64)
        here[list(model.departed_levels)] = 0.0
        wts = wts * here
        mass = wts.sum(-1, keepdim=True)
        wts = torch.where(mass > 0, wts / torch.where(mass > 0, mass, torch.ones_like(mass)),
                          torch.zeros_like(wts))
    delta = (h - h[:, b : b + 1]).transpose(1, 2)  # (G, K, A)
    return {"utility": (w_groups * util_g).sum(-1), "V": V, "V_ps": V_ps, "V_0": V_0,
            "utility_by_group": util_g, "mu": mu_t, "p_bar": p_bar, "wts": wts,
            "delta": delta, "eps": eps, "B": B}


def exact_metrics(model: TabularModel, p: Any, horizon: int, *, gamma: float = 1.0,
                  eps: float | str | None = None, weights: str = "visitation",
                  pair: tuple[int, int] | None = None, batched: bool = False) -> dict[str, Any]:
    """Exact metrics of policy table ``p`` (a torch tensor) on ``model``.

    Returns torch scalars ``utility`` (population-weighted), ``C``, ``DPE``, ``IPE``,
    ``SPE``, ``Lambda``, tensors ``V``, ``V_ps``, ``V_0``, ``utility_by_group`` (G,),
    ``mu`` (T+1, G, K) and the ``pair`` used. Differentiable with respect to ``p``.
    ``batched=True``: ``p`` has a leading dimension of B independent tables, and every
    output gains that leading dimension (``pair`` becomes two index tensors (B,)).
    """
    return _metrics(model, _pass(model, p, horizon, gamma, eps, weights, batched), pair, batched)


def _lambda(pa: Any, pc: Any, wa: Any, wc: Any, da: Any, dc: Any, eps: Any) -> Any:
    """Lambda of pairs (a, c), summed over every (x, x'): eps TV(pi(.|x,a), pi(.|x',c)) /
    (eps + max_a |Delta_a(x,a) - Delta_a(x',c)|) P(x|a) P(x'|c). ``pa``, ``pc`` (..., K, A)
    averaged policies, ``wa``, ``wc`` (..., K) weights, ``da``, ``dc`` (..., K, A) benefits,
    their leading dimensions broadcasting (a pair per start, or every pair of every start)."""
    dd = (da[..., :, None, :] - dc[..., None, :, :]).abs().amax(-1)  # (..., K, K)
    tv = 0.5 * (pa[..., :, None, :] - pc[..., None, :, :]).abs().sum(-1)
    return (eps * tv / (eps + dd) * wa[..., :, None] * wc[..., None, :]).sum((-2, -1))


def _metrics(model: TabularModel, s: dict[str, Any], pair: tuple[int, int] | None,
             batched: bool) -> dict[str, Any]:
    """:func:`exact_metrics`'s dict from the pass ``s`` (:func:`_pass`) for ``pair``."""
    import torch

    B, V = s["B"], s["V"]
    rows = torch.arange(B)
    if pair is not None:  # two distinct groups of the model, as the numpy engine's
        a, c = check_pair(pair, model.n_groups, None)
        ia, ic = torch.full((B,), a), torch.full((B,), c)
    elif model.n_groups == 2:
        ia, ic = torch.zeros(B, dtype=torch.long), torch.ones(B, dtype=torch.long)
    else:
        ia, ic = V.detach().argmax(-1), V.detach().argmin(-1)
        tied = ia == ic  # every group the same V: the pair (0, 1), as check_pair
        ia, ic = torch.where(tied, 0, ia), torch.where(tied, 1, ic)

    p_bar, wts, delta = s["p_bar"], s["wts"], s["delta"]
    lam = _lambda(p_bar[rows, ia], p_bar[rows, ic], wts[rows, ia], wts[rows, ic], delta[ia],
                  delta[ic], s["eps"])  # (B,)

    def gap(v: Any) -> Any:
        return v[rows, ia] - v[rows, ic]

    out = {
        "utility": s["utility"], "C": gap(V), "DPE": gap(V - s["V_ps"]),
        "IPE": gap(s["V_ps"] - s["V_0"]), "SPE": gap(s["V_0"]), "Lambda": lam, "V": V,
        "V_ps": s["V_ps"], "V_0": s["V_0"], "utility_by_group": s["utility_by_group"],
        "mu": s["mu"], "pair": (ia, ic),
    }
    if batched:
        return out
    out = {k: (v[0] if k != "pair" else (int(ia[0]), int(ic[0]))) for k, v in out.items()}
    return out


def _pair_index(model: TabularModel, pairs: Sequence[tuple[int, int]], what: str) -> Any:
    """``pairs`` as two index tensors (L,), each pair two different groups of ``model``."""
    import torch

    if any(ab is None for ab in pairs):  # check_pair reads None as "the default pair"
        raise ModelError(f"{what}: None is not a pair; give (a, b), e.g. (0, 1).")
    out = [check_pair(ab, model.n_groups, None, f"{what}[{i}]") for i, ab in enumerate(pairs)]
    ia = torch.tensor([a for a, _ in out], dtype=torch.long)
    ic = torch.tensor([c for _, c in out], dtype=torch.long)
    return ia, ic


def exact_metrics_by_pair(model: TabularModel, p: Any, horizon: int,
                          pairs: Sequence[tuple[int, int]], *, gamma: float = 1.0,
                          eps: float | str | None = None, weights: str = "visitation",
                          pair: tuple[int, int] | None = None, batched: bool = False,
                          lambda_pairs: Sequence[tuple[int, int]] | None = None) -> dict[str, Any]:
    """:func:`exact_metrics` of ``pair`` (None: the default pair) and, from the same one
    forward pass, every pair's ``C``, ``DPE``, ``IPE``, ``SPE`` and ``Lambda``.

    ``out["by_pair"]`` maps each of ``C``, ``DPE``, ``IPE``, ``SPE`` to a tensor (B, L)
    (L = ``len(pairs)``; (L,) unbatched) whose column j is pair ``pairs[j]`` (a minus b),
    and ``Lambda`` to one whose columns are the pairs of ``lambda_pairs`` (None: ``pairs``;
    ``()`` for none: only Lambda reads the pair itself, K x K terms a pair). Each value
    equals, bit for bit, ``exact_metrics(..., pair=(a, b))``'s: the gaps are differences
    of the pass's per-group V, V_ps, V_0, and Lambda the same K x K sum. Gradients are
    the same up to round-off (the pairs' gradients meet at the shared pass, not at ``p``).
    """

    s = _pass(model, p, horizon, gamma, eps, weights, batched)
    out = _metrics(model, s, pair, True)
    ia, ic = _pair_index(model, pairs, "pairs")
    la, lc = (ia, ic) if lambda_pairs is None else _pair_index(model, lambda_pairs,
                                                                 "lambda_pairs")
    V, V_ps, V_0 = s["V"], s["V_ps"], s["V_0"]
    by = {k: v[:, ia] - v[:, ic] for k, v in (("C", V), ("DPE", V - V_ps),
                                              ("IPE", V_ps - V_0), ("SPE", V_0))}
    p_bar, wts, delta = s["p_bar"], s["wts"], s["delta"]  # Lambda of every pair at once
    by["Lambda"] = _lambda(p_bar[:, la], p_bar[:, lc], wts[:, la], wts[:, lc], delta[la],
                           delta[lc], s["eps"])  # (B, L)
    if batched:
        out["by_pair"] = by
        return out
    out = {k: (v[0] if k != "pair" else (int(v[0][0]), int(v[1][0]))) for k, v in out.items()}
    out["by_pair"] = {k: v[0] for k, v in by.items()}
    return out
