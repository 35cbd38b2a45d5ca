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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair.model import ModelError, TabularModel
from causalfair.policy import Policy, policy_table

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
    if mu is None and (weights == "visitation" or p.ndim == 3):
        mu = model.propagate(p, horizon)
    if p.ndim == 3:
        occ = mu[:horizon]
        mass = occ.sum(0)
        p_bar = np.divide((occ * p[:horizon]).sum(0), mass, out=p[0].copy(), where=mass > 0)
    else:
        p_bar = p
    w = model.initial if weights == "initial" else mu[:horizon].mean(0)
    return w, p_bar


def lambda_pairs(p: np.ndarray, delta: np.ndarray, w: np.ndarray, pair: tuple[int, int],
                 eps: float) -> np.ndarray:
    """Contribution of each (x, x') pair to Lambda: array (K, K) for groups (a, b)."""
    a, b = pair
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
    return float(lambda_pairs(p_bar, model.benefit(), w, pair, eps).sum())


@dataclass(frozen=True, eq=False)
class BenefitResult:
    """Benefit fairness of a policy: Delta table, Lambda and the per-pair contributions."""

    Lambda: float
    eps: float
    weights: str
    delta: np.ndarray  # (G, K)
    p_d1: np.ndarray  # (G, K)
    state_weights: np.ndarray  # (G, K) = P(x | s)
    contributions: np.ndarray  # (K, K) for the pair
    pair: tuple[int, int]
    groups: tuple[str, ...]
    levels: tuple[str, ...]
    dpe_prop1: float  # DPE in Proposition-1 form, sum_t gap of E[pi * Delta]

    def table(self) -> Any:
        """Delta(x, s), pi(d1 | x, s) and P(x | s), one row per (group, level)."""
        import pandas as pd

        G, K = self.delta.shape
        return pd.DataFrame({
            "group": np.repeat(self.groups, K),
            "level": np.tile(self.levels, G),
            "Delta": self.delta.reshape(-1),
            "p_d1": self.p_d1.reshape(-1),
            "P_x": self.state_weights.reshape(-1),
        })

    def worst_pairs(self, n: int = 10) -> Any:
        """The ``n`` (x, x') pairs contributing most to Lambda, largest first."""
        import pandas as pd

        a, b = self.pair
        K = self.contributions.shape[0]
        order = np.argsort(-self.contributions, axis=None, kind="stable")[: max(0, int(n))]
        xa, xb = np.unravel_index(order, (K, K))
        ga, gb = self.groups[a], self.groups[b]
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
            "delta": {g: self.delta[i].tolist() for i, g in enumerate(self.groups)},
            "p_d1": {g: self.p_d1[i].tolist() for i, g in enumerate(self.groups)},
            "worst_pairs": worst.to_dict(orient="records"),
        }

    def summary(self, n_worst: int = 5) -> str:
        lines = [
            f"Benefit fairness: Lambda = {self.Lambda:.6f} (eps = {self.eps:g}, "
            f"P(x | s) = {self.weights})",
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
    """Delta table, Lambda and worst pairs of ``policy`` on ``model``."""
    from causalfair.effects import check_horizon

    T = check_horizon(horizon)
    eps = _check_eps(eps)
    p = np.asarray(policy) if isinstance(policy, np.ndarray) else policy_table(policy, model, T)
    mu = model.propagate(p, T)
    w, p_bar = _weights_and_policy(model, p, T, weights, mu)
    delta = model.benefit()
    contrib = lambda_pairs(p_bar, delta, w, pair, eps)
    pt = p if p.ndim == 3 else np.broadcast_to(p, (T, *p.shape))
    direct = np.einsum("tsx,tsx->s", mu[:T], pt * delta)
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
    )
