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
from dataclasses import replace
from typing import Any

from causalfair._validation import (
    check_alpha,
    check_engine,
    check_flag,
    check_gamma,
    check_keywords,
    check_weights,
    engine_for,
)
from causalfair.engines._mc_base import mc_options
from causalfair.engines.benefit import benefit_fairness as _benefit_exact
from causalfair.engines.benefit import eps_for
from causalfair.engines.benefit_horizon import lambda_horizon
from causalfair.engines.benefit_mc import system_benefit
from causalfair.engines.effects import decompose as _decompose_exact
from causalfair.engines.groups import GroupComparison, check_pairs, lambda_by_forks, pair_arg
from causalfair.engines.groups import compare as _compare_groups
from causalfair.engines.montecarlo import benefit_size, decompose_mc
from causalfair.errors import InputError, short
from causalfair.graph import TemporalGraph
from causalfair.graph import temporal_graph as _temporal_graph
from causalfair.model import CausalStructure, ModelError, TabularModel
from causalfair.policies.grid import reads_group
from causalfair.policies.resolver import resolve, resolved
from causalfair.results import LAMBDA_NEEDS, BenefitResult, Decomposition, check_pair
from causalfair.systems import as_system

__all__ = ["benefit_fairness", "decompose", "compare_groups", "default_pair", "temporal_graph"]


def _system(model: Any, engine: str) -> Any:
    """What the engines read ``model`` as: a bare TabularModel as it is for the exact engine,
    else :func:`~causalfair.systems.as_system` of it. Either way its declared eps (a model's
    ``lambda_eps``, the System's gain built from it) is the same (:func:`eps_for`)."""
    if isinstance(model, (str, os.PathLike)):
        raise ModelError(f"model: got {short(model)}, a name, not a system; pass a System "
                         f"or a TabularModel, e.g. cf.systems.make({short(str(model))}) for a "
                         "registered id or a 'module:callable' factory.")
    return model if isinstance(model, TabularModel) and engine != "mc" else as_system(model)


def _pair(pair: Any, system: Any) -> Any:
    """``pair`` as the engines take it: names or ``"A-B"`` as indices of ``system``'s
    groups, a Series or array as a tuple (:func:`~causalfair.engines.groups.pair_arg`)."""
    return pair_arg(pair, getattr(system, "groups", None) or getattr(system, "group_names", ()))


@check_keywords
def decompose(model: Any, policy: Any, horizon: int | None = None, *, gamma: float = 1.0,
              pair: Any = None, eps: float | str | None = None,
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
    :func:`~causalfair.engines.montecarlo.decompose_mc`. The Monte Carlo options (``n``,
    ``seed``, ``jobs``, ``device``, ``benefit_bins``) are checked on every engine
    (:func:`~causalfair.engines._mc_base.mc_options`): the exact engine ignores a valid
    value and refuses a bad one, as Monte Carlo does. ``pair``: the groups (s+, s-) C
    compares, the first minus the second, as indices ``(0, 3)``, names
    ``("prime", "young")`` or ``"prime-young"``; default the first and the second of two
    groups, else those with the largest and smallest V^pi.
    """
    return _decompose(model, policy, horizon, gamma=gamma, pair=pair, eps=eps, weights=weights,
                      policy_name=policy_name, engine=engine, n=n, seed=seed, alpha=alpha,
                      jobs=jobs, device=device, benefit_bins=benefit_bins)


def _decompose(model: Any, policy: Any, horizon: int | None, *, gamma: float = 1.0,
               pair: Any = None, eps: float | str | None = None,
               weights: str = "visitation", policy_name: str | None = None,
               engine: str = "auto", n: int = 100_000, seed: int = 0, alpha: float = 0.05,
               jobs: int | str = "auto", device: str | None = None, benefit_bins: int = 4,
               benefit_shared: dict | None = None) -> Decomposition:
    """:func:`decompose`; ``benefit_shared``: Monte Carlo only, the dict Lambda's forks keep
    their statistics in for the other pairs (:func:`compare_groups`;
    :func:`~causalfair.engines.montecarlo.decompose_mc`'s)."""
    check_engine(engine)
    check_alpha(alpha)
    gamma = check_gamma(gamma)  # every engine: a bool is no discount (True passed as 1)
    check_weights(weights)
    mc_options(n, seed, jobs, device, benefit_bins)  # Monte Carlo only, refused on every engine
    system = _system(model, engine)
    pair = _pair(pair, system)
    eps, _ = eps_for(eps, system)
    if isinstance(system, TabularModel):
        return _decompose_exact(model, resolved(policy, model), 20 if horizon is None
                                else horizon, gamma=gamma, pair=pair, eps=eps, weights=weights,
                                policy_name=policy_name)
    T = system.horizon if horizon is None else horizon
    policy = resolved(policy, system)
    unit = getattr(getattr(system, "gain", None), "unit", None)  # for the figures' axes
    if engine_for(system, engine) == "exact":
        res = _decompose_exact(system.tabular, policy, T, gamma=gamma, pair=pair, eps=eps,
                               weights=weights, policy_name=policy_name)
        if res.model_name == TabularModel.name:  # the model's unnamed: the system's id, as
            res = replace(res, model_name=system.id)  # the Monte Carlo engine names it
        return _with_unit(res, unit)
    if gamma != 1.0:
        raise ModelError(f"gamma: bad value {gamma!r}; the Monte Carlo engine sums undiscounted "
                         "gains (gamma = 1); discounting needs the exact engine.")
    return _with_unit(decompose_mc(system, policy, T, n=n, seed=seed, pair=pair,
                                  policy_name=policy_name, eps=eps, alpha=alpha, jobs=jobs,
                                  device=device, benefit_bins=benefit_bins,
                                  benefit_shared=benefit_shared, weights=weights), unit)


def _with_unit(result: Any, unit: str | None) -> Any:
    """``result`` (a Decomposition or a BenefitResult) with ``gain_unit`` ``unit``, the
    system's gain unit its ``plot()`` axes say, and its ``benefit`` (a Decomposition's) too."""
    ben = getattr(result, "benefit", None)
    if isinstance(ben, BenefitResult):
        result = replace(result, benefit=replace(ben, gain_unit=unit))
    return replace(result, gain_unit=unit)


def default_pair(system: Any, policy: Any, horizon: int, pair: Any, *, engine: str = "auto",
                 n: int = 20_000, seed: int = 0, eps: float = 0.1, alpha: float = 0.05,
                 bins: int = 4) -> tuple[tuple[int, int], Decomposition | None]:
    """The groups benefit fairness compares on ``system`` (a System or a TabularModel):
    ``pair`` checked (:func:`~causalfair.results.check_pair`), else :func:`decompose`'s
    default pair (method.md section 2): the first and the second of two groups, else the
    groups with the largest and smallest V^pi, by the engine the system supports (exact;
    Monte Carlo: ``n`` units per group, ``seed``). Returns with it the Monte Carlo
    decomposition that found it (Lambda by forks over ``n`` units per group), else None."""
    G = int(system.n_groups)
    if pair is not None or G <= 2:
        return check_pair(pair, G, None), None
    model = system if isinstance(system, TabularModel) else (
        system.tabular if engine_for(system, engine) == "exact" else None)
    if model is not None:
        return _decompose_exact(model, policy, horizon, eps=eps).pair, None
    dec = decompose_mc(system, policy, horizon, n=n, seed=seed, eps=eps, alpha=alpha,
                       benefit_n=n, benefit_bins=bins)
    return dec.pair, dec


@check_keywords
def benefit_fairness(model: Any, policy: Any, horizon: int | None = None, *,
                     eps: float | str | None = None, weights: str = "visitation",
                     pair: Any = None, engine: str = "auto", n: int = 20_000,
                     seed: int = 0, alpha: float = 0.05, horizon_benefit: bool = False,
                     benefit_bins: int = 4) -> BenefitResult:
    """Delta table, Lambda and worst pairs of ``policy`` on ``model``: a
    :class:`~causalfair.model.TabularModel` (exact; ``horizon`` default 20) or a
    :class:`~causalfair.systems.System` (anything :func:`~causalfair.systems.as_system`
    accepts; ``horizon`` default the system's), by the engine it supports: exact with a
    tabular model of independent units, else by forks over ``n`` units per group with a
    seeded bootstrap interval at level 1 - ``alpha`` (``ci``, ``se``). ``engine``:
    "auto", "exact" (refused without a tabular model) or "mc". ``eps``: as
    :func:`decompose`'s; the result's ``eps_source`` says how it was chosen. ``pair``: the
    two groups (indices, names or ``"A-B"``, as :func:`decompose`'s), by default
    :func:`decompose`'s (:func:`default_pair`: with more than two groups those with the
    largest and smallest V^pi, found by a decomposition of the same engine, ``n`` and
    ``seed``), so that Lambda and ``dpe_prop1`` are of the decomposition's pair.
    ``horizon_benefit=True``: Lambda_T instead, the benefit of a decision including its
    delayed effect on the gain under the policy afterwards
    (:mod:`causalfair.engines.benefit_horizon`; ``notion`` "Lambda_T"). ``benefit_bins``:
    by forks on features, the quantile bins per feature of the cells, as :func:`decompose`'s.
    ``plot()`` of the result labels its axes with the system's gain unit (``gain_unit``)."""
    check_engine(engine)
    check_alpha(alpha)
    check_weights(weights)
    horizon_benefit = check_flag("horizon_benefit", horizon_benefit)
    mc_options(n, seed, benefit_bins=benefit_bins)  # Monte Carlo only, refused on every engine
    system = _system(model, engine)  # read once: the body reads it as it is
    ben = _benefit_fairness(system, policy, horizon, eps=eps, weights=weights, pair=pair,
                            engine=engine, n=n, seed=seed, alpha=alpha,
                            horizon_benefit=horizon_benefit, benefit_bins=benefit_bins)
    return ben if isinstance(system, TabularModel) else _with_unit(
        ben, getattr(getattr(system, "gain", None), "unit", None))


def _benefit_fairness(model: Any, policy: Any, horizon: int | None, *, eps: Any, weights: str,
                      pair: Any, engine: str, n: int, seed: int, alpha: float,
                      horizon_benefit: bool, benefit_bins: int) -> BenefitResult:
    """:func:`benefit_fairness`, its arguments checked."""
    if horizon_benefit:
        return _lambda_t(model, policy, horizon, eps, weights, pair, engine, n, seed, alpha,
                         benefit_bins)
    system = _system(model, engine)
    pair = _pair(pair, system)
    eps, source = eps_for(eps, system)
    policy = resolved(policy, system)
    T = (20 if isinstance(system, TabularModel) else system.horizon) if horizon is None \
        else horizon
    if weights != "visitation" and not isinstance(system, TabularModel):
        check_weights(weights, engine_for(system, engine))  # forks refuse it, before any rollout
    pair, dec = default_pair(system, policy, T, pair, engine=engine, n=n, seed=seed, eps=eps,
                             alpha=alpha, bins=benefit_bins)
    if dec is not None and dec.benefit is not None and dec.benefit.method == "mc":
        # forks over n units per group of decompose's pair
        return dec.benefit if source is None else replace(dec.benefit, eps_source=source)
    if isinstance(system, TabularModel):
        return _benefit_exact(model, policy, T, eps=eps, weights=weights, pair=pair,
                              eps_source=source)
    ben = system_benefit(system, policy, T, engine=engine, n=n, seed=seed, eps=eps,
                         weights=weights, alpha=alpha, pair=pair, eps_source=source,
                         bins=benefit_bins)
    if ben is None:
        raise ModelError(f"benefit_fairness: system {getattr(system, 'id', '?')!r}: "
                         f"{LAMBDA_NEEDS}.")
    return ben


def _lambda_t(model: Any, policy: Any, horizon: int | None, eps: Any, weights: str,
              pair: tuple[int, int] | None, engine: str, n: int, seed: int,
              alpha: float, bins: int = 4) -> BenefitResult:
    """Lambda_T by the engine the system supports (exact from a tabular model, else forks),
    of ``pair`` or :func:`default_pair`'s."""
    system = _system(model, engine)
    pair = _pair(pair, system)
    eps, source = eps_for(eps, system)
    policy = resolved(policy, system)
    if isinstance(system, TabularModel):
        T = 20 if horizon is None else horizon
        pair, _ = default_pair(system, policy, T, pair, eps=eps)
        return lambda_horizon(model, policy, T, eps=eps, weights=weights, pair=pair,
                              eps_source=source)
    kind = engine_for(system, engine)
    check_weights(weights, kind)
    T = system.horizon if horizon is None else horizon
    pair, _ = default_pair(system, policy, T, pair, engine=kind, n=n, seed=seed, eps=eps,
                           alpha=alpha, bins=bins)
    return lambda_horizon(system, policy, horizon, engine=kind, eps=eps,
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
    quantile bins per feature: the rollout, cells, cell means and bootstrap replicates of
    the forks are made once, by the decomposition's own Lambda, and shared by every pair).
    Returns a :class:`~causalfair.engines.groups.GroupComparison`: ``worst`` (the pair with
    the largest |C|), ``to_frame()`` (every pair's quantities with intervals, one
    DataFrame), ``groups_frame()``, ``plot()`` (every pair's C with its interval)."""
    mc_options(n, seed, jobs, benefit_bins=benefit_bins)  # Monte Carlo only, every engine
    sy = _system(model, engine)
    check_pairs(sy.n_groups, "compare_groups",  # before any run
                coupled=getattr(sy, "units_per_replica", 1) != 1)
    forks: dict = {}  # Lambda's forks (rollout, cells, replicates'): made once, every pair's
    dec = _decompose(model, policy, horizon, eps=eps, engine=engine, n=n, seed=seed,
                     alpha=alpha, jobs=jobs, benefit_bins=benefit_bins, benefit_shared=forks)
    ben = dec.benefit
    system = None if isinstance(model, TabularModel) and dec.engine == "exact" else as_system(model)
    if ben is None and dec.engine == "exact":  # the exact engine keeps no benefit table
        ben = benefit_fairness(model, policy, dec.horizon, eps=eps, engine="exact",
                               pair=dec.pair)
    return every_pair(dec, ben, system, None if system is None else resolved(policy, system),
                      n=n, seed=seed, alpha=alpha, jobs=jobs, bins=benefit_bins, forks=forks,
                      reference=reference)


def every_pair(dec: Decomposition, ben: BenefitResult | None, system: Any, policy: Any, *,
               n: int, seed: int, alpha: float, jobs: int | str, bins: int, forks: dict,
               reference: str | int | None = None) -> GroupComparison:
    """Every pair of ``dec``'s groups (:func:`causalfair.engines.groups.compare`), Lambda per
    pair exact from ``ben``'s table, else by forks: the decomposition's Lambda forked
    ``benefit_size(n)`` units per group (worlds) with the same ``seed`` and ``bins`` and
    kept its statistics in ``forks``, which are every pair's. ``system`` None: a tabular
    model's exact decomposition. :func:`compare_groups` and ``causalfair decompose``."""
    lambda_of = None
    if system is not None and ben is not None and ben.method != "exact":
        lambda_of = lambda_by_forks(system, policy, dec.horizon, n=benefit_size(n), seed=seed,
                                    eps=ben.eps, alpha=alpha, jobs=jobs, bins=bins,
                                    shared=forks)
    return _compare_groups(dec, reference=reference, alpha=alpha, benefit=ben,
                           lambda_of=lambda_of,
                           attributes=getattr(system, "group_attributes", None),
                           coupled=system is not None and system.units_per_replica != 1)


@check_keywords
def temporal_graph(model_or_structure: Any, horizon: int, *, policy: Any = None,
                   policy_reads_s: bool | None = None, variant: str = "pi") -> TemporalGraph:
    """The temporal causal graph of ``model_or_structure`` (a System, a TabularModel, a
    simulator declaring ``structure``, or a CausalStructure;
    :func:`causalfair.graph.temporal_graph`) under ``policy``, ``variant`` "pi", "pi0" or
    "ps" (method.md section 7). ``policy``: anything :func:`causalfair.policies.resolve`
    accepts, resolved for the system; it reads S (the edges ``S -> D_t``) as
    :func:`causalfair.policies.grid.reads_group` answers, the one answer ``causalfair
    graph --policy/--checkpoint`` draws.
    ``policy_reads_s``: without a policy, whether the policy reads S (default True, the
    conservative graph); with one, refused when it contradicts the policy."""
    if policy is None:
        return _temporal_graph(model_or_structure, horizon, variant=variant,
                               policy_reads_s=True if policy_reads_s is None else policy_reads_s)
    if isinstance(model_or_structure, CausalStructure):
        raise InputError("policy: a CausalStructure alone has no system to evaluate the policy "
                         "on; pass the system (or its tabular model) with policy=, or "
                         "policy_reads_s=True/False instead of policy=.")
    system = as_system(model_or_structure)
    reads = reads_group(resolve(policy, system).policy, system=system)
    if policy_reads_s in (True, False) and bool(policy_reads_s) != reads:
        raise InputError(f"policy_reads_s: {policy_reads_s!r} contradicts the policy, which "
                         f"{'reads' if reads else 'does not read'} S "
                         "(causalfair.policies.grid.reads_group); drop policy_reads_s (the "
                         "policy decides the edges S -> D_t) or pass the policy you mean.")
    return _temporal_graph(model_or_structure, horizon, variant=variant,
                           policy_reads_s=reads if policy_reads_s is None else policy_reads_s)
