"""ELBERT's harder lending environment (Xu et al. ICML 2024; its code's
``lending_experiment/harder_env.py``): the ``lending-harder`` system, a tabular model of
independent applicants.

Seven credit levels, two groups, the delayed-impact repayment probabilities
p(x) = (0.1, 0.2, 0.45, 0.6, 0.65, 0.7, 0.7) for both groups, and ELBERT's initial level
distributions. An approved applicant who repays moves to x' with probability
``REPAY[x][x']``, one who defaults with ``DEFAULT[x][x']`` (the published
``TRANSITION_DYNAMICS[will_default]``: non-adjacent jumps, including the published rows
where a repaying level-5 applicant falls to level 2 with probability 0.5 and a defaulting
level-1 applicant rises to level 5 with probability 0.5 - carried over as published). A
rejected applicant of group g moves as if approved with probability ``ALTER_RATE[g]`` =
(0.3, 0.1), and otherwise stays. So

    P(x' | x, approve) = p(x) REPAY[x] + (1 - p(x)) DEFAULT[x]
    P(x' | x, deny)    = ALTER_RATE[g] P(x' | x, approve) + (1 - ALTER_RATE[g]) 1[x' = x].

Potential, reward and units are those of the other lending systems (f(x) = x^3 /
(K^3 - (K-1)^3); profit interest * p - (1 - p) per approved loan). The published
environment samples with the unseeded global ``np.random`` and moves a population's mass
(ml-fairness-gym's mass shift); here each applicant is an individual of the tabular
model, seeded like every causalfair simulation, and the exact engine applies.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair.errors import ModelError
from causalfair.model import CausalStructure, TabularModel
from causalfair.systems.lending.settings import (
    LENDING_LAMBDA_EPS,
    check_interest,
    lending_potential,
)
from causalfair.systems.system import DecisionSet, Gain, System

__all__ = ["ELBERT_HARDER_LENDING", "harder_lending_model", "make_lending_harder"]

#: The published parameters (ELBERT lending_experiment/harder_env.py and
#: environments/lending_params.py).
ELBERT_HARDER_LENDING: dict[str, Any] = {
    "initial": ((0.05, 0.05, 0.0, 0.2, 0.1, 0.3, 0.3),  # DELAYED_IMPACT_CLUSTER_PROBS_1
                (0.0, 0.0, 0.3, 0.3, 0.3, 0.05, 0.05)),
    "p_repay": (0.1, 0.2, 0.45, 0.6, 0.65, 0.7, 0.7),  # DELAYED_IMPACT_SUCCESS_PROBS
    "alter_rate": (0.3, 0.1),  # ALTER_RATE
    "repay": (  # TRANSITION_DYNAMICS[0]: will_default = False
        (0.2, 0.7, 0.1, 0.0, 0.0, 0.0, 0.0),
        (0.0, 0.2, 0.7, 0.1, 0.0, 0.0, 0.0),
        (0.0, 0.0, 0.2, 0.7, 0.1, 0.0, 0.0),
        (0.0, 0.0, 0.0, 0.2, 0.7, 0.1, 0.0),
        (0.0, 0.5, 0.0, 0.0, 0.2, 0.2, 0.1),
        (0.0, 0.0, 0.0, 0.0, 0.0, 0.2, 0.8),
        (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0),
    ),
    "default": (  # TRANSITION_DYNAMICS[1]: will_default = True
        (0.5, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0),
        (0.9, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0),
        (0.2, 0.7, 0.1, 0.0, 0.0, 0.0, 0.0),
        (0.0, 0.2, 0.7, 0.1, 0.0, 0.0, 0.0),
        (0.0, 0.0, 0.2, 0.7, 0.1, 0.0, 0.0),
        (0.0, 0.0, 0.0, 0.2, 0.7, 0.1, 0.0),
        (0.0, 0.0, 0.0, 0.0, 0.2, 0.7, 0.1),
    ),
    "group_weights": (0.5, 0.5),  # GROUP_0_PROB
    "interest": 1.0,  # INTEREST_RATE
}


def harder_lending_model(interest: float = ELBERT_HARDER_LENDING["interest"],
                         alter_rate: Any = ELBERT_HARDER_LENDING["alter_rate"]) -> Any:
    """The :class:`~causalfair.model.TabularModel` of ``lending-harder``."""
    P = ELBERT_HARDER_LENDING
    p = np.asarray(P["p_repay"], dtype=np.float64)
    rep, dft = np.asarray(P["repay"]), np.asarray(P["default"])
    try:
        alter = np.asarray(alter_rate, dtype=np.float64)
    except (TypeError, ValueError):
        alter = np.array([])
    if alter.shape != (2,) or not ((alter >= 0) & (alter <= 1)).all():
        raise ModelError(f"alter_rate: must be two probabilities (per group), got {alter_rate!r}.")
    interest = check_interest(interest)
    K = p.shape[0]
    approve = p[:, None] * rep + (1.0 - p[:, None]) * dft  # (K, K)
    kernel = np.empty((2, 2, K, K))
    for g in range(2):
        kernel[g, 1] = approve
        kernel[g, 0] = alter[g] * approve + (1.0 - alter[g]) * np.eye(K)
    reward = np.zeros((2, 2, K))
    reward[:, 1] = float(interest) * p - (1.0 - p)
    return TabularModel(
        kernel=kernel, initial=np.asarray(P["initial"]), potential=lending_potential(K),
        reward=reward, group_weights=np.asarray(P["group_weights"]),
        group_names=("s+", "s-"), level_labels=[str(i + 1) for i in range(K)],
        aux={"p_repay": np.tile(p, (2, 1))},
        structure=CausalStructure(exogenous={"Y": (False, True)}, s_to_x0=True,
                                  s_to_transition=True),
        name="lending-harder", action_labels=("deny", "approve"),
        lambda_eps=LENDING_LAMBDA_EPS)


def make_lending_harder(interest: float = ELBERT_HARDER_LENDING["interest"],
                        alter_rate: Any = ELBERT_HARDER_LENDING["alter_rate"]) -> Any:
    """The ``lending-harder`` system (module docstring)."""
    tab = harder_lending_model(interest, alter_rate)
    return System(
        id="lending-harder",
        groups=("s+", "s-"),
        decisions=DecisionSet(labels=("deny", "approve"), baseline=0),
        gain=Gain("qualification gain", "gain units (largest one-level gain = 1)",
                  "f(x') - f(x) with f(x) = x^3 / (K^3 - (K-1)^3)",
                  lambda_eps=tab.lambda_eps),  # the model's declaration
        reward="profit",
        horizon=20,
        structure=tab.structure,
        tabular=tab,
        group_weights=tab.group_weights,
        roles={"score": "p_repay"},
        params={"interest": float(interest), "alter_rate": [float(a) for a in alter_rate]},
        description="ELBERT's harder lending: non-adjacent credit jumps, rejected applicants "
                    "move too (Xu et al., ICML 2024); tabular",
    )
