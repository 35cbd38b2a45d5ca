"""The exact numbers of one policy on a tabular model: the one function every door calls.

:func:`exact_numbers` turns a policy table (or anything :func:`~causalfair.policies.grid.policy_table`
evaluates) into the exact decomposition C = DPE + IPE + SPE with Lambda (method.md
sections 2-4, :func:`causalfair.engines.effects.decompose`) and, on request, the benefit
fairness result (:func:`causalfair.engines.benefit.benefit_fairness`, section 4) and the
other notions (:func:`causalfair.engines.notions.other_notions`: TPR gap, ELBERT bias, W1,
demographic parity). The audit, the exact repair, the PPO trainers and the fair-LP
evaluation read their numbers from it, so they agree bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair._validation import check_horizon
from causalfair.engines.benefit import benefit_fairness, lambda_by_pair
from causalfair.engines.effects import decompose
from causalfair.engines.exact_torch import METRIC_NAMES
from causalfair.engines.notions import other_notions
from causalfair.model import TabularModel
from causalfair.policies.core import Policy
from causalfair.policies.grid import check_policy_table, policy_table
from causalfair.results import BenefitResult, Decomposition

__all__ = ["ExactNumbers", "exact_numbers", "exact_numbers_by_pair", "METRIC_NAMES"]


@dataclass(frozen=True, eq=False)
class ExactNumbers:
    """The exact numbers of one policy table: ``decomposition`` (C, DPE, IPE, SPE,
    utility, Lambda for the decomposition's pair), ``benefit`` (None unless asked for) and
    ``notions`` (None unless asked for); ``table`` is the table they were computed on."""

    table: np.ndarray
    decomposition: Decomposition
    benefit: BenefitResult | None = None
    notions: dict[str, Any] | None = None

    def scalars(self) -> dict[str, float]:
        """``utility``, ``C``, ``DPE``, ``IPE``, ``SPE``, ``Lambda`` as floats (the order of
        :data:`METRIC_NAMES`, the same keys as :func:`~causalfair.engines.exact_torch.exact_metrics`)."""
        d = self.decomposition
        values = {"utility": d.total_utility, "C": d.C, "DPE": d.DPE, "IPE": d.IPE,
                  "SPE": d.SPE, "Lambda": d.Lambda}
        return {k: float(values[k]) for k in METRIC_NAMES}


def exact_numbers(model: TabularModel, policy: Policy | np.ndarray, horizon: int, *,
                  eps: float | str | None = None, weights: str = "visitation",
                  pair: tuple[int, int] | None = None, policy_name: str | None = None,
                  benefit: bool = False, notions: bool = False) -> ExactNumbers:
    """Exact numbers of ``policy`` on ``model`` over ``horizon`` epochs.

    ``policy``: a table pi(d1 | x, s) (G, K) or (T, G, K) (action distributions with
    A > 2 actions), or a Markov policy, evaluated once into its table. ``eps`` and
    ``weights`` are Lambda's (method.md section 4). ``pair``: the groups compared (None:
    the decomposition's default, the largest and smallest V^pi with more than two groups);
    the benefit result and the notions use the decomposition's pair, so Lambda, its worst
    pairs and the gaps all speak of the groups C compares. ``benefit`` / ``notions``: also compute
    :func:`~causalfair.engines.benefit.benefit_fairness` / :func:`~causalfair.engines.notions.other_notions`.
    """
    T = check_horizon(horizon)
    if isinstance(policy, np.ndarray) or not isinstance(model, TabularModel):
        table = policy  # decompose refuses a model that is not tabular, with its message
    else:
        if policy_name is None:
            policy_name = getattr(policy, "name", type(policy).__name__)
        table = np.asarray(policy_table(policy, model, T))
    dec = decompose(model, table, T, eps=eps, weights=weights, pair=pair, policy_name=policy_name)
    others = dec.pair  # (0, 1) with two groups; else the pair C compares
    ben = benefit_fairness(model, table, T, eps=eps, weights=weights, pair=others) if benefit else None
    extra = other_notions(model, table, T, pair=others) if notions else None
    return ExactNumbers(table, dec, ben, extra)


def exact_numbers_by_pair(model: TabularModel, table: np.ndarray, horizon: int,
                          pairs: Sequence[tuple[int, int]], *, eps: float | str | None = None,
                          weights: str = "visitation", pair: tuple[int, int] | None = None
                          ) -> tuple[ExactNumbers, dict[tuple[int, int], dict[str, float]]]:
    """:func:`exact_numbers` of ``table`` for ``pair`` and, from its one decomposition,
    ``C``, ``DPE``, ``IPE``, ``SPE`` and ``Lambda`` of every pair (a, b) of ``pairs`` (a
    minus b): the numbers ``exact_numbers(..., pair=(a, b)).scalars()`` gives, bit for bit
    (the gaps of the per-group V, V_ps, V_0; Lambda's weights and averaged policy once)."""
    ex = exact_numbers(model, table, horizon, eps=eps, weights=weights, pair=pair)
    d, T = ex.decomposition, check_horizon(horizon)
    parts = {"C": d.V, "DPE": d.V - d.V_ps, "IPE": d.V_ps - d.V_0, "SPE": d.V_0}
    lams = lambda_by_pair(model, check_policy_table(model, table, horizon=T), T, pairs, eps=eps,
                          weights=weights)
    return ex, {(int(a), int(b)): {**{k: float(v[a] - v[b]) for k, v in parts.items()},
                                   "Lambda": lam} for (a, b), lam in zip(pairs, lams, strict=True)}
