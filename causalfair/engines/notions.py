"""Other fairness notions, for comparison in reports (method.md section 6), computed
exactly on a tabular model from the state distributions under the policy.

All "rates" are taken over the whole episode (t < T), weighting each epoch by the
state distribution mu_t under pi, as the anchors accumulate them over an episode:

- ``tpr`` (A-PPO's short-term notion): approved among those who would repay,
  sum_t E_mu_t[pi * p_repay] / sum_t E_mu_t[p_repay]; ``tpr_gap`` = |TPR(a) - TPR(b)|.
- ``elbert_rate`` (ELBERT-PO's long-term benefit rate): cumulative supply / cumulative
  demand with supply = approved and repaid, demand = would repay. On the lending model
  this ratio is the episode TPR, so ``elbert_bias`` (max - min over groups) equals the
  TPR gap for two groups; both are reported because the anchors report both.
- ``w1_final`` (F-PPO-L's long-term notion): 1-Wasserstein distance between the groups'
  level distributions at T, sum_k |CDF_a(k) - CDF_b(k)| (in levels).
- ``dp_gap``: |approval rate(a) - approval rate(b)| over the episode.
- ``utility``: expected total reward, population-weighted; ``mean_level_final``: E[x_T]
  per group on levels 1..K.

TPR-type notions need the model's ``p_repay`` table; without it they are None. With
more than two actions (or a baseline other than d0) the rate is named ``selection_rate``
instead of ``approval_rate``: the share given any action other than the baseline (the
selection rate of docs/decomposition.md), and TPR-type notions are None.

A model that declares ``departed_levels`` (individuals who left the population): the rates
count only those present (present mass given the action over present mass, summed over
the epochs), and ``mean_level_final`` / ``w1_*`` use the level distributions of those
present, on the present levels numbered 1.. in order (the departed levels leave the scale).
TPR-type notions are unchanged (``p_repay`` is the model's own table).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair._validation import check_horizon, check_keywords
from causalfair.model import TabularModel
from causalfair.policies.core import Policy
from causalfair.policies.grid import policy_table
from causalfair.results import check_pair

__all__ = ["other_notions", "wasserstein_levels"]


def wasserstein_levels(p: np.ndarray, q: np.ndarray) -> float:
    """1-Wasserstein distance between two distributions over ordered levels (unit spacing)."""
    return float(np.abs(np.cumsum(p) - np.cumsum(q))[:-1].sum())


def _present(dist: np.ndarray, here: np.ndarray) -> np.ndarray:
    """(G, K) level distributions restricted to the present levels ``here``, renormalised
    per group (a group with nobody present: 0)."""
    d = dist[:, here]
    mass = d.sum(1, keepdims=True)
    return np.divide(d, mass, out=np.zeros_like(d), where=mass > 0)


@check_keywords
def other_notions(model: TabularModel, policy: Policy | np.ndarray, horizon: int = 20, *,
                  pair: tuple[int, int] = (0, 1)) -> dict[str, Any]:
    """TPR gap, ELBERT bias, W1, demographic parity gap, utility, final mean levels."""
    T = check_horizon(horizon)
    p = policy_table(policy, model, T)  # a table too: checked as every exact door checks it
    a, b = check_pair(pair, model.n_groups, None)
    mu = model.propagate(p, T)
    occ = mu[:T]  # (T, G, K)
    r = model.reward
    if model.binary:
        pt = p if p.ndim == 3 else np.broadcast_to(p, (T, *p.shape))
        approval = np.einsum("tsx,tsx->s", occ, pt) / T
        utility = np.einsum("tsx,tsx->s", occ, r[:, 0] + pt * (r[:, 1] - r[:, 0]))
    else:
        pa = model.action_table(p)
        pa = pa if pa.ndim == 4 else np.broadcast_to(pa, (T, *pa.shape))
        approval = np.einsum("tsx,tsx->s", occ, 1.0 - pa[..., model.baseline]) / T
        utility = np.einsum("tsx,tsxa,sax->s", occ, pa, r)
    levels = np.arange(1, model.n_levels + 1)
    final, first = mu[T], mu[0]
    if model.departed_levels:  # those present: rates per present epoch, levels renumbered
        here = np.ones(model.n_levels, dtype=bool)
        here[list(model.departed_levels)] = False
        chosen = (np.einsum("tsx,tsx->s", occ[..., here], pt[..., here]) if model.binary else
                  np.einsum("tsx,tsx->s", occ[..., here], 1.0 - pa[..., here, model.baseline]))
        approval = chosen / occ[..., here].sum((0, 2))
        levels = np.arange(1, int(here.sum()) + 1)
        final, first = _present(mu[T], here), _present(mu[0], here)
    out: dict[str, Any] = {
        "approval_rate" if model.binary else "selection_rate":
            {g: float(approval[i]) for i, g in enumerate(model.group_names)},
        "dp_gap": float(abs(approval[a] - approval[b])),
        "w1_final": wasserstein_levels(final[a], final[b]),
        "w1_initial": wasserstein_levels(first[a], first[b]),
        "utility": float(model.group_weights @ utility),
        "mean_level_final": {g: float(final[i] @ levels) for i, g in enumerate(model.group_names)},
        "tpr": None,
        "tpr_gap": None,
        "elbert_rate": None,
        "elbert_bias": None,
    }
    if "p_repay" in model.aux and model.binary:
        q = model.aux["p_repay"]
        supply = np.einsum("tsx,tsx->s", occ, pt * q)
        demand = np.einsum("tsx,sx->s", occ, q)
        rate = np.divide(supply, demand, out=np.zeros_like(supply), where=demand > 0)
        out["tpr"] = {g: float(rate[i]) for i, g in enumerate(model.group_names)}
        out["tpr_gap"] = float(abs(rate[a] - rate[b]))
        out["elbert_rate"] = dict(out["tpr"])
        out["elbert_bias"] = float(rate.max() - rate.min())
    return out
