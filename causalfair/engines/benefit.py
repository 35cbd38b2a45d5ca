"""Benefit fairness (method.md section 4; Plecko & Bareinboim 2023).

The benefit of d1 for an individual at level x in group s is the conditional effect of
the decision on the expected qualification gain,

    Delta(x, s) = h1(x, s) - h0(x, s),   h_d(x, s) = sum_x' P(x' | x, d, s) g^s(x, x').

Benefit fairness asks that individuals of different groups with the same benefit get
the same chance of d1. The paper's metric is a Gini-style sum over pairs

    Lambda = sum_{x, x'} eps |pi(d1|x,s+) - pi(d1|x',s-)| / (eps + |Delta(x,s+) - Delta(x',s-)|)
             * P(x | s+) P(x' | s-).

``P(x | s)`` is either the initial distribution or (default) the visitation distribution
under pi averaged over t < T. For a time-indexed policy, pi(d1 | x, s) is its
visitation-weighted average over t < T.

More than two actions (docs/decomposition.md, "Lambda with more than two actions"): with
actions 0..A-1 and baseline a0, the benefit is the vector Delta_a(x, s) = h_a - h_{a0}, and

    Lambda = sum_{x, x'} eps TV(pi(.|x,s+), pi(.|x',s-)) / (eps + max_a |Delta_a(x,s+) - Delta_a(x',s-)|)
             * P(x | s+) P(x' | s-),

TV the total-variation distance (half the L1 distance) between the two action
distributions. With two actions TV = |pi(d1|x,s+) - pi(d1|x',s-)| and the max is
|Delta(x,s+) - Delta(x',s-)|, so this is the paper's Lambda.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair._validation import check_horizon
from causalfair.model import ModelError, TabularModel
from causalfair.policies.core import Policy, policy_table

__all__ = ["BenefitResult", "benefit_fairness", "lambda_metric", "lambda_pairs", "WEIGHTS"]

WEIGHTS = ("visitation", "initial")


def _check_eps(eps: Any) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not np.isfinite(eps) or eps <= 0:
        raise ModelError(f"eps: must be a number > 0, got {eps!r} (the default is 0.1).")
    return float(eps)


def _weights_and_policy(model: TabularModel, p: np.ndarray, horizon: int, weights: str,
                        mu: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """P(x | s) (G, K) and the (time-averaged) pi(d1 | x, s) (G, K)."""
    if weights not in WEIGHTS:
        raise ModelError(f"weights: unknown value {weights!r}; allowed values: {', '.join(WEIGHTS)}.")
    timed = p.ndim == model.policy_ndim() + 1
    if mu is None and (weights == "visitation" or timed):
        mu = model.propagate(p, horizon)
    if timed and p.ndim == 4:
        occ = mu[:horizon][..., None]
        mass = occ.sum(0)
        p_bar = np.divide((occ * p[:horizon]).sum(0), mass, out=p[0].copy(), where=mass > 0)
    elif timed:
        occ = mu[:horizon]
        mass = occ.sum(0)
        p_bar = np.divide((occ * p[:horizon]).sum(0), mass, out=p[0].copy(), where=mass > 0)
    else:
        p_bar = p
    w = model.initial if weights == "initial" else mu[:horizon].mean(0)
    return w, p_bar


def lambda_pairs(p: np.ndarray, delta: np.ndarray, w: np.ndarray, pair: tuple[int, int],
                 eps: float) -> np.ndarray:
    """Contribution of each (x, x') pair to Lambda: array (K, K) for groups (a, b).
    Two actions: ``p`` (G, K) = pi(d1), ``delta`` (G, K). A > 2: ``p`` (G, K, A) action
    distributions, ``delta`` (G, K, A) benefits over the baseline (TV / sup-norm form)."""
    a, b = pair
    if p.ndim == 3:
        dp = 0.5 * np.abs(p[a][:, None, :] - p[b][None, :, :]).sum(-1)
        dd = np.abs(delta[a][:, None, :] - delta[b][None, :, :]).max(-1)
        return eps * dp / (eps + dd) * w[a][:, None] * w[b][None, :]
    dp = np.abs(p[a][:, None] - p[b][None, :])
    dd = np.abs(delta[a][:, None] - delta[b][None, :])
    return eps * dp / (eps + dd) * w[a][:, None] * w[b][None, :]


def lambda_metric(model: TabularModel, policy: Policy | np.ndarray, horizon: int = 20, *,
                  eps: float = 0.1, weights: str = "visitation", pair: tuple[int, int] = (0, 1),
                  mu: np.ndarray | None = None) -> float:
    """Lambda for groups ``pair`` (default s+, s-)."""
    eps = _check_eps(eps)
    p = np.asarray(policy) if isinstance(policy, np.ndarray) else policy_table(policy, model, horizon)
    w, p_bar = _weights_and_policy(model, p, horizon, weights, mu)
    if not model.binary:
        p_bar = model.action_table(p_bar)
    return float(lambda_pairs(p_bar, _benefit_table(model), w, pair, eps).sum())


def _benefit_table(model: TabularModel) -> np.ndarray:
    """Delta as (G, K) for two actions with baseline d0; otherwise (G, K, A), the
    benefit of every action over the baseline (actions last)."""
    if model.binary:
        return model.benefit()
    return np.moveaxis(model.benefits(), 1, -1)


@dataclass(frozen=True, eq=False)
class BenefitResult:
    """Benefit fairness of a policy: Delta table, Lambda and the per-pair contributions."""

    Lambda: float
    eps: float
    weights: str
    delta: np.ndarray  # (G, K); (G, K, A) benefit of each action over the baseline for A > 2
    p_d1: np.ndarray  # (G, K) = pi(d1 | x, s); (G, K, A) action distributions for A > 2
    state_weights: np.ndarray  # (G, K) = P(x | s)
    contributions: np.ndarray  # (K, K) for the pair
    pair: tuple[int, int]
    groups: tuple[str, ...]
    levels: tuple[str, ...]
    dpe_prop1: float  # DPE in Proposition-1 form, sum_t gap of E[pi * Delta]
    actions: tuple[str, ...] = ("d0", "d1")
    method: str = "exact"  # "exact" (tabular model) or "mc" (forks on a simulator)
    se: float | None = None  # Monte Carlo: bootstrap standard error of Lambda
    ci: tuple[float, float] | None = None  # Monte Carlo: percentile interval of Lambda
    ci_level: float | None = None
    cells: str = "levels"  # what the pairs pair: "levels", or feature bins (Monte Carlo)

    @property
    def multi(self) -> bool:
        return self.delta.ndim == 3

    def table(self) -> Any:
        """Delta(x, s), pi(d1 | x, s) and P(x | s), one row per (group, level)."""
        import pandas as pd

        G, K = self.delta.shape[:2]
        cols: dict[str, Any] = {"group": np.repeat(self.groups, K), "level": np.tile(self.levels, G)}
        if self.multi:
            for i, act in enumerate(self.actions):
                cols[f"Delta[{act}]"] = self.delta[..., i].reshape(-1)
            for i, act in enumerate(self.actions):
                cols[f"pi[{act}]"] = self.p_d1[..., i].reshape(-1)
        else:
            cols["Delta"] = self.delta.reshape(-1)
            cols["p_d1"] = self.p_d1.reshape(-1)
        cols["P_x"] = self.state_weights.reshape(-1)
        return pd.DataFrame(cols)

    def worst_pairs(self, n: int = 10) -> Any:
        """The ``n`` (x, x') pairs contributing most to Lambda, largest first."""
        import pandas as pd

        a, b = self.pair
        K = self.contributions.shape[0]
        order = np.argsort(-self.contributions, axis=None, kind="stable")[: max(0, int(n))]
        xa, xb = np.unravel_index(order, (K, K))
        ga, gb = self.groups[a], self.groups[b]
        if self.multi:
            def rows(arr: np.ndarray, g: int, xs: np.ndarray) -> list[list[float]]:
                return [[round(float(v), 12) for v in arr[g, x]] for x in xs]

            return pd.DataFrame({
                f"level[{ga}]": [self.levels[i] for i in xa],
                f"level[{gb}]": [self.levels[i] for i in xb],
                f"Delta[{ga}]": rows(self.delta, a, xa),
                f"Delta[{gb}]": rows(self.delta, b, xb),
                f"pi[{ga}]": rows(self.p_d1, a, xa),
                f"pi[{gb}]": rows(self.p_d1, b, xb),
                "weight": self.state_weights[a, xa] * self.state_weights[b, xb],
                "contribution": self.contributions[xa, xb],
                "share": self.contributions[xa, xb] / self.Lambda if self.Lambda > 0 else 0.0,
            })
        return pd.DataFrame({
            f"level[{ga}]": [self.levels[i] for i in xa],
            f"level[{gb}]": [self.levels[i] for i in xb],
            f"Delta[{ga}]": self.delta[a, xa],
            f"Delta[{gb}]": self.delta[b, xb],
            f"p_d1[{ga}]": self.p_d1[a, xa],
            f"p_d1[{gb}]": self.p_d1[b, xb],
            "weight": self.state_weights[a, xa] * self.state_weights[b, xb],
            "contribution": self.contributions[xa, xb],
            "share": self.contributions[xa, xb] / self.Lambda if self.Lambda > 0 else 0.0,
        })

    def to_dict(self, n_worst: int = 10) -> dict[str, Any]:
        worst = self.worst_pairs(n_worst)
        return {
            "Lambda": self.Lambda,
            "eps": self.eps,
            "weights": self.weights,
            "DPE_prop1": self.dpe_prop1,
            **({"method": self.method, "se": self.se,
                "ci": None if self.ci is None else list(self.ci), "ci_level": self.ci_level,
                "cells": self.cells} if self.method != "exact" else {}),
            "delta": {g: self.delta[i].tolist() for i, g in enumerate(self.groups)},
            "p_d1": {g: self.p_d1[i].tolist() for i, g in enumerate(self.groups)},
            "worst_pairs": worst.to_dict(orient="records"),
        }

    def summary(self, n_worst: int = 5) -> str:
        ci = (f", {100 * self.ci_level:g}% bootstrap CI [{self.ci[0]:.6f}, {self.ci[1]:.6f}]"
              if self.ci is not None else "")
        lines = [
            f"Benefit fairness: Lambda = {self.Lambda:.6f}{ci} (eps = {self.eps:g}, "
            f"P(x | s) = {self.weights}"
            + (f"; Monte Carlo by forks, pairs of {self.cells})" if self.method == "mc" else ")"),
            f"DPE (Proposition 1 form) = {self.dpe_prop1:+.6f}",
            "Worst pairs:",
            self.worst_pairs(n_worst).to_string(index=False, float_format=lambda x: f"{x:.4f}"),
        ]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        return (
            f"<div><strong>Benefit fairness: Lambda = {self.Lambda:.6f}</strong> "
            f"(eps = {self.eps:g}, P(x | s) = {self.weights})"
            f"{self.worst_pairs().to_html(index=False, float_format=lambda x: f'{x:.4f}')}</div>"
        )


def benefit_fairness(model: TabularModel, policy: Policy | np.ndarray, horizon: int = 20, *,
                     eps: float = 0.1, weights: str = "visitation",
                     pair: tuple[int, int] = (0, 1)) -> BenefitResult:
    """Delta table, Lambda and worst pairs of ``policy`` on a tabular ``model``, exactly.
    :func:`causalfair.benefit_fairness` chooses between this engine and forks from what a
    system supports."""
    if not isinstance(model, TabularModel):
        raise ModelError(f"model: expected a TabularModel, got {type(model).__name__}; for a "
                         "system use causalfair.benefit_fairness, which picks the engine it "
                         "supports.")
    T = check_horizon(horizon)
    eps = _check_eps(eps)
    p = np.asarray(policy) if isinstance(policy, np.ndarray) else policy_table(policy, model, T)
    mu = model.propagate(p, T)
    w, p_bar = _weights_and_policy(model, p, T, weights, mu)
    if model.binary:
        delta = model.benefit()
        contrib = lambda_pairs(p_bar, delta, w, pair, eps)
        pt = p if p.ndim == 3 else np.broadcast_to(p, (T, *p.shape))
        direct = np.einsum("tsx,tsx->s", mu[:T], pt * delta)
    else:
        delta = _benefit_table(model)  # (G, K, A)
        p_bar = model.action_table(p_bar)
        contrib = lambda_pairs(p_bar, delta, w, pair, eps)
        pa = model.action_table(p)
        pt = pa if pa.ndim == 4 else np.broadcast_to(pa, (T, *pa.shape))
        direct = np.einsum("tsx,tsxa->s", mu[:T], pt * delta)
    a, b = pair
    return BenefitResult(
        Lambda=float(contrib.sum()),
        eps=eps,
        weights=weights,
        delta=delta,
        p_d1=p_bar,
        state_weights=w,
        contributions=contrib,
        pair=(a, b),
        groups=tuple(model.group_names),
        levels=tuple(model.level_labels),
        dpe_prop1=float(direct[a] - direct[b]),
        actions=tuple(model.action_labels or (f"d{i}" for i in range(model.n_actions))),
    )
