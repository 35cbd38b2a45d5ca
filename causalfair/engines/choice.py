"""The engine a system supports: :func:`decompose` and :func:`benefit_fairness` for any
system or tabular model.

Exact (:func:`causalfair.engines.effects.decompose`, :func:`causalfair.engines.benefit.benefit_fairness`)
when the system has a tabular model of independent units, else Monte Carlo
(:func:`causalfair.engines.montecarlo.decompose_mc`, benefit by forks
:func:`causalfair.engines.benefit_mc.benefit_fairness_mc`); ``engine="exact"`` or ``"mc"`` forces
one (:func:`causalfair._validation.engine_for` decides, for every door). Lambda always
comes with its interval: the point itself for the exact engine, the seeded bootstrap
interval of the forks for Monte Carlo.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from causalfair._validation import ENGINES, check_alpha, check_keywords, engine_for
from causalfair.engines.benefit import benefit_fairness as _benefit_exact
from causalfair.engines.benefit import eps_for
from causalfair.engines.benefit_horizon import lambda_horizon
from causalfair.engines.benefit_mc import system_benefit
from causalfair.engines.effects import decompose as _decompose_exact
from causalfair.engines.groups import GroupComparison, lambda_by_forks
from causalfair.engines.groups import compare as _compare_groups
from causalfair.engines.montecarlo import decompose_mc
from causalfair.model import ModelError, TabularModel
from causalfair.policies.resolver import resolve
from causalfair.results import LAMBDA_NEEDS, BenefitResult, Decomposition
from causalfair.systems import as_system

__all__ = ["benefit_fairness", "decompose", "compare_groups"]


def _check_engine(engine: Any) -> None:
    if engine not in ENGINES:
        raise ModelError(f"engine: bad value {str(engine)[:40]!r}; allowed values: "
                         f"{', '.join(ENGINES)}.")


def _system(model: Any, engine: str) -> Any:
    """What the engines read ``model`` as: a bare TabularModel as it is for the exact engine,
    else :func:`~causalfair.systems.as_system` of it. Either way its declared eps (a model's
    ``lambda_eps``, the System's gain built from it) is the same (:func:`eps_for`)."""
    if isinstance(model, (str, os.PathLike)):
        raise ModelError(f"model: got {str(model)[:80]!r}, a name, not a system; pass a System "
                         f"or a TabularModel, e.g. cf.systems.make({str(model)[:80]!r}) for a "
                         "registered id or a 'module:callable' factory.")
    return model if isinstance(model, TabularModel) and engine != "mc" else as_system(model)


def _resolved(policy: Any, system: Any) -> Any:
    """``policy`` as the engines evaluate it (:func:`causalfair.policies.resolve`); a table
    stays an array for the exact engine's own checks."""
    return policy if isinstance(policy, np.ndarray) and isinstance(system, TabularModel) \
        else resolve(policy, system).policy


@check_keywords
def decompose(model: Any, policy: Any, horizon: int | None = None, *, gamma: float = 1.0,
              pair: tuple[int, int] | None = None, eps: float | str | None = None,
              weights: str = "visitation", policy_name: str | None = None,
              engine: str = "auto", n: int = 100_000, seed: int = 0,
              alpha: float = 0.05, jobs: int | str = "auto",
              device: str | None = None, benefit_bins: int = 4) -> Decomposition:
    """Decomposition C = DPE + IPE + SPE of a policy, with Lambda (benefit fairness,
    method.md section 4, with ``eps`` and ``weights``: "visitation" or "initial") and its
    interval. ``eps``: a number in the gain's units, "auto" (scale-free: 0.1 x the 90th
    percentile of |Delta|), or None: the value the system or tabular model declares
    (``lambda_eps``: 0.1 on the lending models), else "auto"
    (:func:`~causalfair.engines.benefit.eps_for`, for every door).

    ``model``: a :class:`~causalfair.model.TabularModel` (``horizon`` default 20) or a
    :class:`~causalfair.systems.System` (anything :func:`~causalfair.systems.as_system`
    accepts; ``horizon`` default the system's). The engine is the one the system supports:
    exact with a tabular model of independent units, else Monte Carlo (``n`` units per
    group or worlds, ``seed``, intervals at level 1 - ``alpha``); ``engine="exact"`` or
    ``"mc"`` forces one. ``policy``: anything :func:`causalfair.policies.resolve` accepts (a
    Policy, a built-in name, a checkpoint path, a factory, an SB3 model or torch module, a
    function, a table pi(d1 | x, s) of shape (G, K) or (T, G, K)). Monte Carlo only:
    ``jobs`` threads (``"auto"``: the cores this process may use; the numbers do not depend
    on it) and ``device`` for a network policy's forward pass (``"cpu"``, ``"cuda"``,
    ``"auto"``; default ``CAUSALFAIR_DEVICE``, else the CPU), and ``benefit_bins``, the
    quantile bins per feature of Lambda's cells on a system observed through features, as
    :func:`~causalfair.engines.montecarlo.decompose_mc`.
    """
    _check_engine(engine)
    check_alpha(alpha)
    system = _system(model, engine)
    eps, _ = eps_for(eps, system)
    if isinstance(system, TabularModel):
        return _decompose_exact(model, _resolved(policy, model), 20 if horizon is None
                                else horizon, gamma=gamma, pair=pair, eps=eps, weights=weights,
                                policy_name=policy_name)
    T = system.horizon if horizon is None else horizon
    policy = _resolved(policy, system)
    if engine_for(system, engine) == "exact":
        return _decompose_exact(system.tabular, policy, T, gamma=gamma, pair=pair, eps=eps,
                                weights=weights, policy_name=policy_name)
    if gamma != 1.0:
        raise ModelError(f"gamma: bad value {gamma!r}; the Monte Carlo engine sums undiscounted "
                         "gains (gamma = 1); discounting needs the exact engine.")
    if weights != "visitation":
        raise ModelError(f"weights: bad value {weights!r}; Lambda by forks weighs states by "
                         "visitation; \"initial\" needs the exact engine.")
    return decompose_mc(system, policy, T, n=n, seed=seed, pair=pair, policy_name=policy_name,
                        eps=eps, alpha=alpha, jobs=jobs, device=device,
                        benefit_bins=benefit_bins)


@check_keywords
def benefit_fairness(model: Any, policy: Any, horizon: int | None = None, *,
                     eps: float | str | None = None, weights: str = "visitation",
                     pair: tuple[int, int] = (0, 1), engine: str = "auto", n: int = 20_000,
                     seed: int = 0, alpha: float = 0.05, horizon_benefit: bool = False,
                     benefit_bins: int = 4) -> BenefitResult:
    """Delta table, Lambda and worst pairs of ``policy`` on ``model``: a
    :class:`~causalfair.model.TabularModel` (exact; ``horizon`` default 20) or a
    :class:`~causalfair.systems.System` (anything :func:`~causalfair.systems.as_system`
    accepts; ``horizon`` default the system's), by the engine it supports: exact with a
    tabular model of independent units, else by forks over ``n`` units per group with a
    seeded bootstrap interval at level 1 - ``alpha`` (``ci``, ``se``). ``engine``:
    "auto", "exact" (refused without a tabular model) or "mc". ``eps``: as
    :func:`decompose`'s; the result's ``eps_source`` says how it was chosen.
    ``horizon_benefit=True``: Lambda_T instead, the benefit of a decision including its
    delayed effect on the gain under the policy afterwards
    (:mod:`causalfair.engines.benefit_horizon`; ``notion`` "Lambda_T"). ``benefit_bins``:
    by forks on features, the quantile bins per feature of the cells, as :func:`decompose`'s."""
    _check_engine(engine)
    check_alpha(alpha)
    if horizon_benefit:
        return _lambda_t(model, policy, horizon, eps, weights, pair, engine, n, seed, alpha,
                         benefit_bins)
    system = _system(model, engine)
    eps, source = eps_for(eps, system)
    if isinstance(system, TabularModel):
        return _benefit_exact(model, _resolved(policy, model), 20 if horizon is None
                              else horizon, eps=eps, weights=weights, pair=pair,
                              eps_source=source)
    ben = system_benefit(system, _resolved(policy, system), horizon, engine=engine, n=n, seed=seed, eps=eps,
                         weights=weights, alpha=alpha, pair=pair, eps_source=source,
                         bins=benefit_bins)
    if ben is None:
        raise ModelError(f"benefit_fairness: system {getattr(system, 'id', '?')!r}: "
                         f"{LAMBDA_NEEDS}.")
    return ben


def _lambda_t(model: Any, policy: Any, horizon: int | None, eps: Any, weights: str,
              pair: tuple[int, int], engine: str, n: int, seed: int,
              alpha: float, bins: int = 4) -> BenefitResult:
    """Lambda_T by the engine the system supports (exact from a tabular model, else forks)."""
    system = _system(model, engine)
    eps, source = eps_for(eps, system)
    if isinstance(system, TabularModel):
        return lambda_horizon(model, _resolved(policy, model), horizon, eps=eps,
                              weights=weights, pair=pair, eps_source=source)
    kind = engine_for(system, engine)
    if kind == "mc" and weights != "visitation":
        raise ModelError(f"weights: bad value {weights!r}; Lambda_T by forks weighs states by "
                         "visitation; \"initial\" needs the exact engine.")
    return lambda_horizon(system, _resolved(policy, system), horizon, engine=kind, eps=eps,
                          weights=weights, pair=pair, n=n, seed=seed, alpha=alpha,
                          eps_source=source, bins=bins)


@check_keywords
def compare_groups(model: Any, policy: Any, horizon: int | None = None, *,
                   reference: str | int | None = None, eps: float | str | None = None,
                   engine: str = "auto", n: int = 100_000, seed: int = 0,
                   alpha: float = 0.05, jobs: int | str = "auto",
                   benefit_bins: int = 4) -> GroupComparison:
    """Every group against ``reference`` (default the first group) and every pair, with the
    worst pair: C, DPE, IPE, SPE, Lambda and the ratios with intervals
    (:mod:`causalfair.engines.groups`). One :func:`decompose` by the engine the system
    supports gives every group's values; the pairs are differences of them (Lambda per pair:
    the exact formula, or forks per pair for Monte Carlo, on cells of ``benefit_bins``
    quantile bins per feature)."""
    dec = decompose(model, policy, horizon, eps=eps, engine=engine, n=n, seed=seed,
                    alpha=alpha, jobs=jobs, benefit_bins=benefit_bins)
    ben = dec.benefit
    system = None if isinstance(model, TabularModel) and dec.engine == "exact" else as_system(model)
    if ben is None and dec.engine == "exact":  # the exact engine keeps no benefit table
        ben = benefit_fairness(model, policy, dec.horizon, eps=eps, engine="exact")
    lambda_of = None
    if system is not None and ben is not None and ben.method != "exact":
        lambda_of = lambda_by_forks(system, _resolved(policy, system), dec.horizon,
                                    n=min(n, 20_000), seed=seed, eps=ben.eps, alpha=alpha,
                                    jobs=jobs, bins=benefit_bins)
    return _compare_groups(dec, reference=reference, alpha=alpha, benefit=ben,
                           lambda_of=lambda_of,
                           attributes=getattr(system, "group_attributes", None),
                           coupled=system is not None and system.units_per_replica != 1)
