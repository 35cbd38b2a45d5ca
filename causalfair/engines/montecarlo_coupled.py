"""The Monte Carlo engine on systems of coupled units (``System.units_per_replica`` > 1: a
replica is a world whose units interact, e.g. the members of a contact graph): one
replica per row of a batch, per-replica group means, standard errors clustered by
replica, one categorical draw per replica under a budget of one action, ELBERT's
benefit-rate bias from the supply and demand a simulator reports, and the seed's long-term
gap at the end of the episode when the simulator has ``long_term_gap(state)``. Entry point:
:func:`causalfair.engines.montecarlo.decompose_mc`, which sends such systems here."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from causalfair._limits import check_memory
from causalfair._validation import check_horizon
from causalfair.engines._mc_base import (
    DEFAULT_BATCH_SIZE,
    MOMENT_KEYS,
    STREAM_DECISION,
    STREAM_FORK,
    STREAM_INIT,
    STREAM_INIT0,
    STREAM_NOISE,
    STREAM_NOISE0,
    Job,
    Moments,
    PairMoments,
    batches,
    check_int,
    check_policy_state,
    check_work,
    engine_backend,
    fold_tasks,
    mc_options,
    paired_bytes,
    paired_cov,
    present_units,
    sample_actions,
    type_name,
)
from causalfair.errors import InputError, PolicyError, SimulatorContractError
from causalfair.policies.core import action_probs
from causalfair.policies.grid import engine_policy
from causalfair.results import Decomposition, check_pair
from causalfair.systems.contract import seeded_rng

__all__: list[str] = []


def joint_actions(probs: np.ndarray, u: np.ndarray, m: int, U: int, base: int,
                  name: str) -> np.ndarray:
    """Budget 1 on coupled units: one categorical draw per replica. ``probs`` (m * U, A):
    each unit's probabilities; the non-baseline entries of a replica's units are the
    shares of its draw (they must sum to at most 1), "nobody" takes the rest. ``u``: one
    uniform per replica. Returns one action per unit (the baseline for all but the drawn)."""
    A = probs.shape[1]
    others = [a for a in range(A) if a != base]
    p = probs[:, others].reshape(m, U * len(others))
    cum = np.cumsum(p, axis=1)
    if (cum[:, -1] > 1.0 + 1e-9).any():
        raise PolicyError(
            f"policy {name!r}: under a budget of one action per replica, the probabilities of "
            f"a replica's units must sum to at most 1; got {float(cum[:, -1].max()):.6g}. Give "
            "each unit its probability of being the one chosen.")
    pick = (u[:, None] < cum).argmax(axis=1)
    hit = u < cum[:, -1]
    d = np.full((m, U), base, dtype=np.intp)
    rows = np.nonzero(hit)[0]
    unit, which = np.divmod(pick[rows], len(others))
    d[rows, unit] = np.asarray(others, dtype=np.intp)[which]
    return d.reshape(-1)


def _coupled_batch(task: tuple[Job, int, int, int, int]) -> tuple[np.ndarray, dict[str, np.ndarray],
                                                                   np.ndarray]:
    """Batch ``b`` of ``m`` replicas of ``U`` coupled units: per-step gain sums per group,
    the counts of the units of each group given each action and the sums over the replicas
    of each group's mean gain in its replica (6 + A, G, T: V's, V^PS's and V^pi0's step
    shares whatever each replica's units per group), per-replica
    group means of each total (m, G) keyed like ``MOMENT_KEYS``, and the units per replica
    and group (m, G)."""
    job, U, G, b, m = task
    sim, policy, T, seed, crn, name, A, base = (job.sim, job.policy, job.T, job.seed, job.crn,
                                                 job.name, job.A, job.base)
    state = sim.reset(m, None, seeded_rng(seed, 0, b, STREAM_INIT))
    group = np.asarray(sim.observe(state).group, dtype=np.intp)
    if group.shape != (m * U,):
        raise SimulatorContractError(
            f"simulator {job.sim_name}.observe: a batch of {m} replicas of {U} units needs "
            f"{m * U} observations, got {group.shape[0]}.")
    rep = np.repeat(np.arange(m), U)
    cell = rep * G + group
    cnt = np.bincount(cell, minlength=m * G).reshape(m, G)
    if (cnt == 0).any():
        return np.zeros((6 + A, G, T)), {}, cnt
    sums = np.zeros((6 + A, G, T))
    state0 = state if crn else sim.reset(m, None, seeded_rng(seed, 0, b, STREAM_INIT0))
    rng_noise, rng_dec = seeded_rng(seed, 0, b, STREAM_NOISE), seeded_rng(seed, 0, b, STREAM_DECISION)
    rng_fork, rng_0 = seeded_rng(seed, 0, b, STREAM_FORK), seeded_rng(seed, 0, b, STREAM_NOISE0)
    if callable(getattr(policy, "start_batch", None)):
        policy.start_batch(m * U, None)
    acc = {k: np.zeros(m * U) for k in ("A", "B", "Z", "R")}
    sd: dict[str, np.ndarray] | None = None  # supply and demand, when the simulator reports them
    d0 = np.full(m * U, base, dtype=np.intp)
    if A == 2 and base == 0:
        d0 = d0.astype(bool)
    for t in range(T):
        obs = sim.observe(state)
        probs = action_probs(policy, obs, A, f"policy {name!r}", units=m * U)
        if job.budget == 1:
            d = joint_actions(probs, rng_dec.random(m), m, U, base, name)
        else:
            d = sample_actions(probs, rng_dec.random(m * U))
        if A == 2 and base == 0:
            d = d.astype(bool)
        noise = sim.draw_noise(m * U, rng_noise)
        res = sim.step(state, d, noise)
        fork = sim.step(state, d0, noise if crn else sim.draw_noise(m * U, rng_fork))
        res0 = sim.step(state0, d0, noise if crn else sim.draw_noise(m * U, rng_0))
        for k, r in (("A", res.gain), ("B", fork.gain), ("Z", res0.gain), ("R", res.reward)):
            r = np.asarray(r, dtype=np.float64)
            if r.shape != (m * U,) or not np.isfinite(r).all():
                raise SimulatorContractError(
                    f"simulator {job.sim_name}.step: gains and rewards must be {m * U} finite "
                    f"values for {m} replicas of {U} units.")
            acc[k] += r
        for i, r in enumerate((res.gain, fork.gain, res0.gain)):
            r = np.asarray(r, dtype=np.float64)
            sums[i, :, t] += np.bincount(group, weights=r, minlength=G)
            sums[3 + A + i, :, t] += (np.bincount(cell, weights=r, minlength=m * G)
                                      .reshape(m, G) / cnt).sum(0)
        cells = np.asarray(d, dtype=np.intp) * G + group  # decisions, of those present
        here = present_units(obs, job.departed, job.sim_name)
        sums[3:3 + A, :, t] += np.bincount(cells if here is None else cells[here],
                                      minlength=A * G)[:A * G].reshape(A, G)
        info = getattr(res, "info", None) or {}
        if "supply" in info and "demand" in info:
            if sd is None:
                sd = {"supply": np.zeros(m * U), "demand": np.zeros(m * U)}
            for k in sd:
                sd[k] += np.asarray(info[k], dtype=np.float64)
        state, state0 = res.state, res0.state
    mean = {k: np.bincount(cell, weights=v, minlength=m * G).reshape(m, G) / cnt
            for k, v in acc.items()}
    mean["AB"], mean["BZ"] = mean["A"] - mean["B"], mean["B"] - mean["Z"]
    if sd is not None:  # per replica and group: total supply and demand over the episode
        for k, v in sd.items():
            mean[f"_{k}"] = np.bincount(cell, weights=v, minlength=m * G).reshape(m, G)
    if callable(getattr(sim, "long_term_gap", None)):  # the seed's long-term gap at the end
        for k, s in (("_long_gap", state), ("_long_gap_pi0", state0)):
            mean[k] = np.asarray(sim.long_term_gap(s), dtype=np.float64).reshape(m, 1)
    return sums, mean, cnt


def decompose_coupled(system: Any, policy: Any, horizon: int, *, n: int, seed: int, crn: bool,
                      batch_size: int | None, pair: Any, policy_name: str | None,
                      backend: Any = None, jobs: Any = "auto", device: str = "cpu",
                      check: bool = True) -> Decomposition:
    """Monte Carlo decomposition for coupled units (``System.units_per_replica`` = U > 1:
    the units of one replica interact, e.g. the nodes of a contact graph).

    Protocol: ``reset(n_replicas, None, rng)`` returns the state of n_replicas * U units
    (replica-major), whose groups ``observe`` reports; ``step`` takes one action per unit.
    ``n`` counts replicas (worlds). Per replica and group, the gains of the group's units
    are averaged; V, V^PS, V^pi0 of a group are means of those over replicas. The pi^PS
    fork is one all-baseline step of the whole world from the same state and noise; pi0
    is the world rolled with the baseline action everywhere. C, DPE, IPE and SPE are
    between-group differences *within* replicas, so their standard errors come from the
    per-replica differences (replicas are the independent units: clustering by world):
    the run keeps the moments of the per-world difference of every pair of groups, for
    every total (:class:`~causalfair.engines._mc_base.PairMoments`), so every pair's
    standard error is paired (the decomposition's ``paired_var``), the compared pair's and
    the others', with the same arithmetic.
    ``jobs`` and ``device`` as :func:`~causalfair.engines.montecarlo.decompose_mc`'s (the
    device resolved).
    """
    T = check_horizon(horizon)
    n, seed, _ = mc_options(n, seed, jobs)
    U = system.units_per_replica
    batch = max(1, (DEFAULT_BATCH_SIZE // U)) if batch_size is None else check_int(
        "batch_size", batch_size, 1)
    check_work(n * U * T, f"Monte Carlo of {n} worlds of {U} units over {T} epochs",
               "lower n or the horizon")

    check_memory(8.0 * 40 * min(batch, n) * U + 8.0 * 24 * T, f"Monte Carlo over {T} epochs "
                 f"of worlds of {U} units", "use a smaller batch_size")
    # per-world totals kept for ELBERT's bias and the long-term gap (supply, demand, gaps),
    # and every pair's per-world differences' moments (G x G per total: its paired se)
    check_memory(8.0 * n * (2 * system.n_groups + 2) + paired_bytes(system.n_groups),
                 f"Monte Carlo over {n} worlds of {system.n_groups} groups",
                 "lower n, or merge groups")
    sim = system.make_simulator()
    A, base, G = system.n_actions, system.decisions.baseline, system.n_groups
    name = (getattr(policy, "name", type(policy).__name__) if policy_name is None
            else policy_name)
    if check:  # a user's policy: rows of other worlds, its observation and its attributes
        check_policy_state(policy, sim, A, name, units=U)
    policy = engine_policy(policy, system, A, horizon=T, device=device)
    per_group = {k: [Moments() for _ in range(G)] for k in MOMENT_KEYS}
    pm = {k: PairMoments(G) for k in MOMENT_KEYS}  # every pair's per-world differences
    sums = np.zeros((6 + A, G, T))  # gain sums, decision counts, step shares (_coupled_batch)
    counts = None

    budget = system.decisions.budget
    if budget is not None and budget != 1:
        raise InputError(f"system {system.id!r}: decisions.budget = {budget}: the Monte Carlo "
                         "engine draws budgets of 1 (one categorical per replica); a larger "
                         "budget must be enforced by the simulator (budget None).")
    job = Job(sim=sim, policy=policy, T=T, seed=seed, crn=crn, A=A, base=base, name=name,
               sim_name=type_name(sim), budget=budget, departed=system.departed)
    backend = engine_backend(backend, jobs, sim, policy)
    tasks = ((job, U, G, b, m) for b, m in batches(n, batch))
    if pair is not None:  # a named pair is checked before the run
        check_pair(pair, G, None)
    supply_demand: dict[str, list[np.ndarray]] = {}
    same = True  # every world has counts' units of each group

    def fold(task: tuple[Any, ...], result: tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]
             ) -> None:
        nonlocal counts, sums, same
        b = task[3]
        batch_sums, mean, cnt = result
        if (cnt == 0).any():
            raise SimulatorContractError(
                f"system {system.id!r}: every replica needs units of every group (a replica "
                "has none of some group).")
        if b == 0:
            counts = cnt[0]
        same = same and bool((cnt == counts).all())  # each group's units: one in all?
        sums += batch_sums
        for k, arr in mean.items():
            if k.startswith("_"):  # supply / demand totals, long-term gaps: kept per replica
                supply_demand.setdefault(k, []).append(arr)
                continue
            for g in range(G):
                per_group[k][g].add(arr[:, g])
            pm[k].add(arr)

    # in this process each batch is folded as it comes (memory O(batch)); elsewhere the
    # batches' (m, G) means come back and are folded in task order
    fold_tasks(backend, _coupled_batch, tasks, -(-n // batch), fold,
                f"monte carlo {name} (worlds)", result_bytes=8.0 * ((6 + A) * G * T + 8 * G * batch))
    V = np.array([s_.mean for s_ in per_group["A"]])
    V_ps = np.array([s_.mean for s_ in per_group["B"]])
    V_0 = np.array([s_.mean for s_ in per_group["Z"]])
    util = np.array([s_.mean for s_ in per_group["R"]])
    # the default pair from every world's estimates, as independent units' (every pair's
    # per-world differences are kept): the largest and smallest V^pi with more than two groups
    ab = check_pair(pair, G, V)
    # per value: the variance of each group's mean and of each pair's per-world difference
    pv = {key: pm[stat].paired_var(per_group[stat]) for key, stat in _PAIRED_KEYS}
    se: dict[str, float] = {k: math.sqrt(float(pv[v][ab[0], ab[1]])) for k, v in (
        ("C", "V"), ("DPE", "direct"), ("IPE", "indirect"), ("SPE", "V_0"))}
    for i, gname in enumerate(system.groups):
        for key, stat in (("V", "A"), ("V_ps", "B"), ("V_0", "Z"), ("direct", "AB"),
                          ("indirect", "BZ"), ("utility", "R")):
            st = per_group[stat][i]
            se[f"{key}[{gname}]"] = float(math.sqrt(st.var / st.n))
    weights = system.group_weights
    # the population's utility w' U: its groups' rewards share worlds, so w' cov w (not the
    # independent groups' sum of w_g^2 var_g)
    w = np.asarray(weights, dtype=np.float64)
    se["utility"] = math.sqrt(max(0.0, float(np.einsum("g,gh,h->", w, paired_cov(
        pv["utility"]), w))))
    notions = _benefit_rate_bias(supply_demand, system.groups) if "_supply" in supply_demand else {}
    for k, key in (("_long_gap", "long_term_gap"), ("_long_gap_pi0", "long_term_gap_pi0")):
        if k in supply_demand:  # mean over replicas of the final state's gap, and its SE
            x = np.concatenate(supply_demand[k])[:, 0]
            notions[key] = float(x.mean())
            notions[f"{key}_se"] = float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else math.nan
    return Decomposition(
        engine="mc", groups=system.groups, pair=ab, horizon=T, V=V, V_ps=V_ps, V_0=V_0,
        # each step's share of V, V^PS, V^pi0 (the per-world group means'); worlds alike in
        # their units per group: the gain sums over n times those units (the same to rounding)
        steps=sums[:3] / (n * counts[:, None]) if same else sums[3 + A:] / n,
        decisions=sums[3:3 + A].transpose(1, 0, 2).astype(np.int64), utility_by_group=util,
        group_weights=weights, Lambda=None,
        se=se, n=n, seed=seed, diagnostics={}, policy_name=name, model_name=system.id,
        notions=notions, n_counts="worlds", units_per_world=int(U),
        group_units_per_world=dict(zip(system.groups, map(int, counts), strict=True))
        if same else None, paired_var=pv,
    )


#: The per-group values of a decomposition and the total of ``MOMENT_KEYS`` each is the
#: mean of: the keys of ``Decomposition.paired_var``.
_PAIRED_KEYS = (("V", "A"), ("V_ps", "B"), ("V_0", "Z"), ("direct", "AB"), ("indirect", "BZ"),
             ("utility", "R"))


def _benefit_rate_bias(sd: Mapping[str, list[np.ndarray]], groups: tuple[str, ...]
                       ) -> dict[str, float]:
    """ELBERT's benefit rates and bias (Xu et al. ICML 2024) from per-replica totals of supply and
    demand (lists of (m, G) arrays): the rate of group g is R_g = E[supply_g] / E[demand_g]
    (a ratio of expectations over episodes), the bias max_g R_g - min_g R_g. Its standard
    error by the delta method over replicas (replicas are independent; the two groups of a
    replica are not): the bias linearises to L_i = (S_ai - R_a D_ai) / mean(D_a) -
    (S_bi - R_b D_bi) / mean(D_b)."""
    S = np.concatenate(sd["_supply"])
    D = np.concatenate(sd["_demand"])
    n = S.shape[0]
    dbar = D.mean(axis=0)
    out: dict[str, float] = {}
    if (dbar <= 0).any():  # a group without demand has no benefit rate
        return out
    rate = S.mean(axis=0) / dbar
    for g, name in enumerate(groups):
        out[f"benefit_rate[{name}]"] = float(rate[g])
    a, b = int(np.argmax(rate)), int(np.argmin(rate))
    lin = (S[:, a] - rate[a] * D[:, a]) / dbar[a] - (S[:, b] - rate[b] * D[:, b]) / dbar[b]
    out["elbert_bias"] = float(rate[a] - rate[b])
    out["elbert_bias_se"] = float(lin.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return out
