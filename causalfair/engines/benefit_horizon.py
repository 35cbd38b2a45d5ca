"""Benefit fairness over the horizon, Lambda_T (docs/decomposition.md, "Lambda_T").

The paper's Lambda (method.md section 4, :mod:`causalfair.engines.benefit`) compares
individuals with the same *same-step* benefit Delta_a(x, s) = h_a(x, s) - h_{a0}(x, s): a
decision whose benefit is entirely delayed (no gain this step, a gain later) is
invisible to it. Lambda_T uses instead the benefit of the decision including its delayed
effect on the gain under the policy afterwards:

    Delta^T_a(x, s, t) = Q_t(x, s, a) - Q_t(x, s, a0),
    Q_t(x, s, a) = h_a(x, s) + sum_x' P(x' | x, a, s) W_{t+1}(x', s),
    W_t(x, s) = sum_a pi_t(a | x, s) Q_t(x, s, a),   W_T = 0,

the expected cumulative gain from step t to the horizon T when the decision at t is a
and the policy decides afterwards (a fork at t with action a against the baseline, then
the policy to T). Delta^T(x, s) is its visitation-weighted average over t < T (as pi(d1 | x,
s) is for a time-indexed policy), and Lambda_T is Lambda's formula with Delta^T in place
of Delta: the same pairs, weights P(x | s) and action distributions. At T = 1 it is
Lambda.

- Exact (:func:`lambda_horizon_exact`): the backward recursion above on a tabular model
  of independent units, O(T G A K^2).
- Monte Carlo (:func:`lambda_horizon_mc`, independent units only): at every visited state
  the unit is forked once per action and each fork follows the policy to T with the main
  path's random numbers (common random numbers); Delta^T_a is the difference of the
  forks' cumulative gains. Cells, thresholding and the bootstrap interval are those of
  :func:`causalfair.engines.benefit_mc.benefit_fairness_mc`. Cost O(T^2 A n) steps per
  group. Coupled units (U > 1) are refused: a fork of one unit would need the others'
  continuations too.

``eps``: as Lambda's; ``"auto"`` is set from the benefits Delta^T (they are cumulative,
so usually larger than the same-step ones).

The result's ``dpe_prop1`` is the DPE in Proposition-1 form, as Lambda's: the gap of
sum_t E[sum_a pi(a | x_t, s) Delta_a(x_t, s)] with the *same-step* benefits (method.md
section 3; by forks, each visit's fork gains at the forked step), so it is the
decomposition's DPE; Delta^T in its place is no part of C.

Small n (docs/decomposition.md, "Lambda_T by forks at small n"): the forks' Delta^T are
unbiased, but the reported Lambda_T is biased upward while n is small. Lambda by forks sets
a benefit gap to 0 where it is within sqrt(log n) standard errors of 0 (right where gaps
are exactly 0, as same-step ones often are); Delta^T's gaps include each group's own later
decisions, so they are often small but not 0, and are zeroed until n is large enough.
The interval (the hull with the plug-in's) still covers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from causalfair._validation import check_horizon, check_weights
from causalfair.engines.benefit import (
    eps_for,
    lambda_pairs,
    present_benefits,
    resolve_eps,
    weights_and_policy,
)
from causalfair.engines.benefit_forks import Visits, decide, join_rollouts, rollout_tasks
from causalfair.engines.benefit_mc import benefit_fairness_mc
from causalfair.errors import InputError
from causalfair.model import ModelError, TabularModel
from causalfair.policies.core import Policy, action_probs
from causalfair.policies.grid import policy_table
from causalfair.policies.resolver import resolved
from causalfair.results import BenefitResult
from causalfair.systems import as_system
from causalfair.systems.contract import seeded_rng

__all__ = ["horizon_benefits", "lambda_horizon_exact", "lambda_horizon_mc", "lambda_horizon"]

#: Random streams of the Monte Carlo Lambda_T (disjoint from the other engines').
_STREAM = 12


def horizon_benefits(model: TabularModel, p: np.ndarray, horizon: int) -> np.ndarray:
    """Delta^T_a(x, s, t) as an array (T, G, K, A) (zero at the baseline action) for a
    policy table ``p`` (stationary or time-indexed) on ``model``."""
    T = check_horizon(horizon)
    pa = model.action_table(np.asarray(p, dtype=np.float64))
    pt = pa if pa.ndim == 4 else np.broadcast_to(pa, (T, *pa.shape))
    h = model.expected_gain()  # (G, A, K)
    G, A, K = h.shape
    W = np.zeros((G, K))
    out = np.empty((T, G, K, A))
    for t in range(T - 1, -1, -1):
        Q = h + np.einsum("saxy,sy->sax", model.kernel, W)
        out[t] = np.moveaxis(Q - Q[:, model.baseline][:, None], 1, -1)
        W = np.einsum("sxa,sax->sx", pt[t], Q)
    return out


def lambda_horizon_exact(model: TabularModel, policy: Policy | np.ndarray, horizon: int = 20, *,
                         eps: float | str | None = None, weights: str = "visitation",
                         pair: tuple[int, int] = (0, 1), eps_source: str | None = None
                         ) -> BenefitResult:
    """Lambda_T of ``policy`` on a tabular ``model``, exactly (module docstring)."""
    if not isinstance(model, TabularModel):
        raise ModelError(f"model: expected a TabularModel, got {type(model).__name__}.")
    T = check_horizon(horizon)
    eps, declared = eps_for(eps, model)  # None: what the model declares, else "auto"
    eps_source = eps_source or declared
    p = policy_table(policy, model, T)
    mu = model.propagate(p, T)
    w, p_bar = weights_and_policy(model, p, T, weights, mu)
    dt = horizon_benefits(model, p, T)
    occ = mu[:T][..., None]
    mass = occ.sum(0)
    delta = np.divide((occ * dt).sum(0), mass, out=dt[0].copy(), where=mass > 0)  # (G, K, A)
    # the Delta^T of the non-baseline actions at the levels of those present
    eps, eps_source = resolve_eps(eps, present_benefits(model, delta[..., 1] if model.binary
                                                         else delta), eps_source)
    pa = model.action_table(p_bar)
    contrib = lambda_pairs(pa, delta, w, pair, eps)
    a, b = pair
    binary = model.binary
    pt = model.action_table(p)
    pt = pt if pt.ndim == 4 else np.broadcast_to(pt, (T, *pt.shape))
    # the DPE in Proposition-1 form: the same-step benefits (method.md section 3), not Delta^T
    direct = np.einsum("tsx,tsxa->s", mu[:T], pt * np.moveaxis(model.benefits(), 1, -1))
    return BenefitResult(
        Lambda=float(contrib.sum()), eps=eps, eps_source=eps_source, weights=weights,
        delta=delta[..., 1] if binary else delta, p_d1=p_bar if binary else pa,
        state_weights=w, contributions=contrib, pair=(a, b), groups=tuple(model.group_names),
        levels=tuple(model.level_labels), dpe_prop1=float(direct[a] - direct[b]),
        actions=tuple(model.action_labels or (f"d{i}" for i in range(model.n_actions))),
        notion="Lambda_T", departed=tuple(model.departed_levels or ()),
    )


def _rollout_horizon(system: Any, policy: Any, T: int, n: int, seed: int, pname: str,
                     jobs: Any = "auto", direct: np.ndarray | None = None) -> tuple:
    """:func:`causalfair.engines.benefit_forks.rollout_units`' outputs with each visit's benefit
    Delta^T_a (the forks' cumulative gains to T, common random numbers) in place of the
    same-step one, in the same tasks (per group, or per batch of a simulator that
    declares its ``batch_size``: :func:`~causalfair.engines.benefit_forks.rollout_tasks`).
    ``jobs`` is accepted for the same signature; the tasks run here. ``direct`` (G,), when
    given, gets each group's sum over its visits of sum_a pi(a) x the fork's same-step
    benefit gain_a - gain_{a0} (n times the DPE's Proposition-1 term of the group)."""
    sim = system.make_simulator()
    A, base, G = system.n_actions, system.decisions.baseline, system.n_groups
    binary = A == 2 and base == 0
    parts: list[list[tuple]] = [[] for _ in range(G)]
    for g, b, start, m in rollout_tasks(sim, G, n):
        key = (g,) if b is None else (g, b)
        out, same = _horizon_task(sim, policy, T, m, seed, key, start, A, base, binary, pname)
        parts[g].append(out)
        if direct is not None:
            direct[g] += same
    return join_rollouts(parts)


def _horizon_task(sim: Any, policy: Any, T: int, m: int, seed: int, key: tuple[int, ...],
                  start: int, A: int, base: int, binary: bool, pname: str
                  ) -> tuple[tuple, float]:
    """One task of :func:`_rollout_horizon`: ``m`` units of group ``key[0]`` numbered from
    ``start``, from the streams ``key``; its visits' arrays and the sum over its visits of
    sum_a pi(a) (gain_a - gain_{a0}) at the forked step (the same-step benefit)."""
    g = key[0]

    def act(a: int) -> np.ndarray:
        return np.full(m, bool(a)) if binary else np.full(m, a)

    state = sim.reset(m, g, seeded_rng(seed, _STREAM, *key, 0))
    rng_noise, rng_dec = seeded_rng(seed, _STREAM, *key, 1), seeded_rng(seed, _STREAM, *key, 2)
    noises = [sim.draw_noise(m, rng_noise) for _ in range(T)]
    uniforms = rng_dec.random((T, m))
    visits = Visits()
    same = 0.0
    for t in range(T):
        obs = sim.observe(state)
        p = action_probs(policy, obs, A, f"policy {pname!r}", units=m)
        totals, first = np.zeros((m, A)), np.zeros((m, A))
        for a in range(A):  # fork: action a at t, then the policy to T, same numbers
            res = sim.step(state, act(a), noises[t])
            first[:, a] = totals[:, a] = np.asarray(res.gain, dtype=np.float64)
            branch = res.state
            for s in range(t + 1, T):
                pb = action_probs(policy, sim.observe(branch), A, f"policy {pname!r}")
                res = sim.step(branch, decide(pb, uniforms[s], A, base), noises[s])
                totals[:, a] += np.asarray(res.gain, dtype=np.float64)
                branch = res.state
        visits.add(obs, totals - totals[:, base:base + 1], p)
        same += float((p * (first - first[:, base:base + 1])).sum())
        state = sim.step(state, decide(p, uniforms[t], A, base), noises[t]).state
    return visits.arrays(m, T, start), same


def lambda_horizon_mc(system: Any, policy: Any, horizon: int | None = None, *,
                      n: int = 2_000, seed: int = 0, eps: float | str | None = None,
                      alpha: float = 0.05, n_boot: int = 200, pair: tuple[int, int] = (0, 1),
                      eps_source: str | None = None, bins: int = 4) -> BenefitResult:
    """Lambda_T of ``policy`` on ``system`` by forks to the horizon (module docstring),
    with its bootstrap interval at level 1 - ``alpha`` (cells: ``bins`` quantile bins per
    feature, as :func:`~causalfair.engines.benefit_mc.benefit_fairness_mc`'s)."""
    system = as_system(system)
    if system.units_per_replica > 1:
        raise InputError(f"Lambda_T: system {system.id!r} couples {system.units_per_replica} "
                         "units per world; Lambda_T by forks needs independent units (use "
                         "Lambda, or a tabular model).")
    direct = np.zeros(system.n_groups)  # the DPE's Proposition-1 terms, same-step benefits

    def rollout(*args: Any) -> tuple:
        return _rollout_horizon(*args, direct=direct)

    res = benefit_fairness_mc(system, policy, horizon, n=n, seed=seed, eps=eps, alpha=alpha,
                              n_boot=n_boot, pair=pair, jobs=None, eps_source=eps_source,
                              rollout=rollout, bins=bins)
    a, b = res.pair
    return replace(res, notion="Lambda_T", dpe_prop1=float((direct[a] - direct[b]) / n))


def lambda_horizon(system: Any, policy: Any, horizon: int | None = None, *,
                   engine: str = "exact", eps: float | str | None = None,
                   weights: str = "visitation",
                   pair: tuple[int, int] = (0, 1), n: int = 2_000, seed: int = 0,
                   alpha: float = 0.05, eps_source: str | None = None,
                   bins: int = 4) -> BenefitResult:
    """Lambda_T by the engine ``engine`` ("exact": the system's tabular model; "mc":
    forks, cells of ``bins`` quantile bins per feature), as
    :func:`causalfair.benefit_fairness` chooses it."""
    eps, declared = eps_for(eps, system if isinstance(system, TabularModel) else as_system(system))
    eps_source = eps_source or declared
    # anything the other doors take (a built-in name, a table, a checkpoint...), as they do
    policy = resolved(policy, system if isinstance(system, TabularModel) else as_system(system))
    if engine == "exact":
        model = system if isinstance(system, TabularModel) else as_system(system).tabular
        T = 20 if horizon is None and isinstance(system, TabularModel) else (
            as_system(system).horizon if horizon is None else horizon)
        return lambda_horizon_exact(model, policy, T, eps=eps, weights=weights, pair=pair,
                                    eps_source=eps_source)
    check_weights(weights, "mc")  # by forks: visitation only, never left unused
    return lambda_horizon_mc(system, policy, horizon, n=n, seed=seed, eps=eps, alpha=alpha,
                             pair=pair, eps_source=eps_source, bins=bins)
