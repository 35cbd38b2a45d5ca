"""Benefit fairness on any simulator, by forks (method.md section 4).

Without a tabular model there is no benefit table Delta(x, s), so it is estimated:

1. **Benefit by forks.** n units per group are rolled forward T steps under the policy.
   At every visited state the simulator is forked once per action with the step's own
   random numbers: gain_a - gain_{a0} is an unbiased draw of the benefit
   Delta_a(x_t, s) = E[g | x_t, a] - E[g | x_t, a0] of that state (common random
   numbers make it a low-variance one).
2. **Pairing through cells.** Lambda compares individuals of two groups "with the same
   state". States are grouped into cells: the discrete level when observations carry
   one, otherwise joint quantile bins of the features (``bins`` per feature, edges from
   the pooled visits of both groups, so both groups share the cells). Per (group, cell):
   the mean benefit, the mean action distribution of the policy and the visitation
   weight (visits averaged over t < T, as the exact engine's default); a system that
   declares ``departed`` levels drops the visits there (those present only).
3. **Lambda** is then the exact formula of :mod:`causalfair.engines.benefit` over cells (for
   A > 2 actions: total variation over the sup norm of the benefit gap).
4. **Kinks.** Lambda contains |Delta_a(x, s+) - Delta_a(x', s-)|, which is not smooth
   where a true benefit gap is exactly 0 (common: a group-symmetric effect of an action).
   There the estimated gap is biased away from 0 by about its standard error, and so is
   Lambda. As in the log audit (docs/logs.md), the reported Lambda is the *thresholded*
   estimate: a pair's benefit gap is set to 0 where |gap| <= sqrt(log n) times its
   bootstrap standard error (:func:`pretest`); every bootstrap replicate runs the same
   test on its own gaps (the same cut), since the mask is part of the estimator: with
   the estimate's mask held fixed, a zeroed gap added nothing to the spread of the
   replicates, and the standard error was a quarter of the estimate's spread over seeds
   on lending-harder at n = 5,000 per group (0.0020 against 0.0074).
5. **Confidence interval**: a seeded bootstrap over individuals (Poisson(1) weights per
   individual, every replicate recomputes the cell means and Lambda) gives the standard
   errors of the thresholded and the plug-in estimates (:func:`lambda_hull`); the
   plug-in's replicates are linear in the benefit gaps (:func:`plugin_tangent`: a
   replicate's |gap| folds at 0 and spread too little where the true gaps are small but
   not 0, so the hull covered 0.90 on lending-harder at n = 5,000 per group; with this
   and the pre-test in every replicate, point 4, 0.987: docs/decomposition.md; the log
   audit's Lambda uses both functions). The reported
   interval is the hull of their normal intervals, estimate +- z * se, each
   around its own estimate, clipped to [0, 1]: the thresholded interval misses where a small
   non-zero gap was set to 0, the plug-in one where a zero gap was not, the hull covers
   in both regimes (as the log audit's, docs/logs.md). The standard error is that of the
   thresholded estimate. The hull contains the thresholded estimate by construction;
   bootstrap *percentile* intervals do not: Lambda is a non-smooth function of cell
   means (|.|, the ratio, the mask), its replicates are shifted against the
   estimate, and with few replicates the estimate fell above the upper percentile
   (3 of 20 seeds at ``n_boot`` = 3 on a feature-binned system), so a Lambda above a
   gate's bound could pass on the far end. Coverage of the exact Lambda on the example
   clinic over 200 seeds (n = 4,000, ``n_boot`` = 100): 0.995 for a three-action policy
   (0.90 with the estimate's mask in every replicate). The interval is
   asymmetric by design: where the mask zeroes many pairs the estimate sits near the
   upper end and the lower end reaches the plug-in's. Cells are fixed across replicates.
   The bootstrap cannot see floating-point rounding (a replicate rounds as the estimate
   does: a cell where the policy's distribution is constant gives a mean a few hundred
   units of the last place off it, and replicates within 1e-16 of each other), so each
   half-width is at least a bound on the rounding of a positive estimate
   (:func:`rounding_bound`): the interval covers the exact Lambda of a constant cell,
   and reaches 0 where identical decision rows leave a Lambda of rounding (1e-13).
6. **Pairs**: the pairs of a multi-group audit and the decomposition's own pair share the
   rollout, the cells, the groups' cell means and the bootstrap replicates' (``shared``); a
   pair adds its own mask and terms, over the cells both of its groups visit only (a term
   with a cell one group does not visit weighs 0: the same K x K array, the same sums).
7. **Unvisited cells**: a cell a group does not visit has no estimate; the result's
   ``visited`` mask says which, its :meth:`~causalfair.results.BenefitResult.table`
   shows NaN there, and the arrays keep 0 (weight 0 in every sum).

**Coupled units** (``System.units_per_replica`` = U > 1: a contact graph, sites sharing
a budget): ``n`` counts worlds, rolled forward under the policy (joint draws as the
decomposition's engine makes them). A unit's benefit is taken *on its own*: at every
visited world state the step is forked once per unit and action, the unit taking that
action and every other unit the baseline, with the step's random numbers; Delta_a of the
unit is its gain there minus its gain when nobody acts. It keeps the interference that
runs through the state (a member's infected neighbours, a site's rate) and leaves out
this step's decisions of the others, which the policy, not the unit's benefit, decides.
Example: on ``infectious-1`` a susceptible member with k infected neighbours has benefit
1 - (1 - tau)^k from a vaccine (the infection it prevents this step), any other member
0; Lambda then asks that members of the two communities with the same infection risk get
the same chance of the vaccine. The bootstrap resamples worlds; the Proposition-1 DPE is
then sum_t E[pi Delta] with these unit-alone benefits, not the decomposition's DPE.

With ``bins`` cells the estimate targets Lambda of the *binned* system: a coarser binning
pairs less similar individuals (it averages benefits within a cell). On a system whose
observations carry levels the cells are the levels and the estimate targets the exact
Lambda (tested against the exact engine on the example clinic).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from causalfair._limits import check_memory
from causalfair._validation import check_alpha, check_horizon, check_weights, engine_for, z_quantile
from causalfair.backends import engine_device, resolve_jobs
from causalfair.engines._mc_base import check_policy_state, check_work, engine_backend
from causalfair.engines.benefit import benefit_fairness, eps_for, resolve_eps
from causalfair.engines.benefit_cells import visit_cells
from causalfair.engines.benefit_forks import (
    STREAM,
    forks_bytes,
    rollout_coupled,
    rollout_units,
)
from causalfair.errors import InputError, SimulatorContractError
from causalfair.policies.grid import engine_policy, group_features
from causalfair.policies.resolver import resolved
from causalfair.results import BenefitResult, check_pair
from causalfair.systems import as_system
from causalfair.systems.contract import seeded_rng

__all__ = ["N_BOOT", "benefit_fairness_mc", "system_benefit", "lambda_hull", "rounding_bound",
           "pretest", "plugin_tangent"]


#: Bootstrap replicates of Lambda by forks unless asked otherwise (the standard errors).
N_BOOT = 200

def lambda_hull(estimates: list[tuple[float, float]], alpha: float,
                rounding: float = 0.0) -> tuple[float, float]:
    """The reported (1 - alpha) interval of Lambda from (estimate, standard error) pairs
    (thresholded, plug-in): the hull of the normal intervals estimate +- z * se, each
    around its own estimate, clipped to [0, 1], where Lambda lies (weights summing to 1
    times total variations at most 1; module docstring, point 5). It contains every
    estimate it is given, so the thresholded Lambda lies inside its own interval.
    ``rounding``: a bound on the floating-point error of a positive estimate
    (:func:`rounding_bound`), the least half-width of its interval (an estimate of exactly
    0, every term 0, keeps its own)."""
    z = z_quantile(alpha)

    def half(e: float, s: float) -> float:
        return max(z * s, rounding) if e > 0 else z * s

    return (max(0.0, min(e - half(e, s) for e, s in estimates)),
            min(1.0, max(e + half(e, s) for e, s in estimates)))


def rounding_bound(most: int, delta: np.ndarray, eps: float) -> float:
    """A bound on the floating-point error of Lambda by forks: each cell mean is a sum of
    at most ``most`` weighted visits over their weight, off by at most ``most`` units of
    the last place (u = 2^-53) of its terms' magnitude; a total variation moves by at
    most that (the distributions sum to 1), a benefit gap by that times max |Delta|, so
    a term eps TV / (eps + gap) w w by (2 + 2 max |Delta| / eps) of it, the weights by 2
    more. The bootstrap cannot show this error: a replicate rounds like the estimate (a
    constant cell, a policy of the cell alone, gives an interval about 1e-16 wide,
    around a mean that sum(w x) / sum(w) put a few hundred units of the last place off
    its value), so it is the least half-width of the interval (:func:`lambda_hull`)."""
    top = float(max(delta.max(), -delta.min())) if delta.size else 0.0  # max |Delta|
    return most * 2.0 ** -53 * (4.0 + 2.0 * top / eps)


def total_variation(pa: np.ndarray, pb: np.ndarray) -> np.ndarray:
    """The total variation 0.5 sum_a |pa[i, a] - pb[j, a]| of every pair of rows (i, j) of
    two arrays of action distributions, (len(pa), len(pb)): the same bits as
    ``0.5 * np.abs(pa[:, None, :] - pb[None, :, :]).sum(-1)``, which numpy adds in the
    actions' order for fewer than 8 actions (tests/engines/test_lambda_terms.py), without
    its (rows, rows, A) temporaries, whose short last axis costs numpy some 20 times more
    (256 cells, two actions: 1.7 ms against 0.1 ms a bootstrap replicate)."""
    if pa.shape[1] >= 8:  # numpy adds 8 or more terms in another order
        return 0.5 * np.abs(pa[:, None, :] - pb[None, :, :]).sum(-1)
    pa, pb = np.ascontiguousarray(pa.T), np.ascontiguousarray(pb.T)
    tv = np.abs(pa[0][:, None] - pb[0][None, :])
    for a in range(1, len(pa)):
        tv += np.abs(pa[a][:, None] - pb[a][None, :])
    return 0.5 * tv


def _blocks(size: int, least: int = 16) -> list[tuple[int, int]]:
    """``size`` rows cut into at most 16 blocks (start, stop) of at least ``least`` rows
    each (one block below 2 * ``least``). The blocks depend on the sizes alone, not on the
    threads, so results assembled from them do not depend on ``jobs``; 16 rows or more keep
    a matrix product on its matrix-matrix kernel (one row would take the matrix-vector one,
    which rounds differently)."""
    cuts = np.linspace(0, size, min(16, max(1, size // least)) + 1).astype(int)
    return list(zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True))


def benefit_fairness_mc(system: Any, policy: Any, horizon: int | None = None, *,
                        n: int = 20_000, seed: int = 0, eps: float | str | None = None,
                        alpha: float = 0.05, bins: int = 4, n_boot: int = N_BOOT,
                        pair: tuple[int, int] = (0, 1), jobs: Any = "auto",
                        eps_source: str | None = None, rollout: Any = None,
                        device: str | None = None, shared: dict | None = None,
                        backend: Any = None, check: bool = True) -> BenefitResult:
    """Benefit fairness of ``policy`` on ``system`` (any :class:`~causalfair.systems.System`,
    or anything :func:`~causalfair.systems.as_system` accepts), estimated by forks; see the
    module docstring. ``n`` units per group, ``bins`` quantile bins per feature when the
    observations have no levels, ``n_boot`` bootstrap replicates for the standard errors of
    the (1 - alpha) interval (:func:`lambda_hull`). ``jobs``: threads the groups' rollouts
    run on (``"auto"``: the cores this process may use;
    :func:`~causalfair.engines._mc_base.engine_backend`). Same seed, same numbers,
    whatever ``jobs``. ``device``: where a network policy's forward
    pass runs (:func:`causalfair.backends.engine_device`; default the CPU). ``shared``: a
    dict kept across calls with the same system, policy, horizon, ``n`` and ``seed`` (the
    pairs of :mod:`causalfair.engines.groups`): the rollout, the cells, the cell means and
    the bootstrap replicates' are made once and reused (module docstring, point 6).
    ``backend``: worker processes or Ray (:func:`causalfair.backends.make_backend`) to run
    the groups' rollouts on, one task per group, the same numbers as here. ``check``: refuse
    a user's policy whose rows depend on their batch, that changes its observation or keeps
    state between calls (:func:`~causalfair.engines._mc_base.check_policy_state`, the Monte
    Carlo engine's check; False where a decomposition's run has made it)."""
    system = as_system(system)
    T = check_horizon(system.horizon if horizon is None else horizon)
    eps, declared = eps_for(eps, system)  # None: what the system declares, else "auto"
    eps_source = eps_source or declared
    for name, v, lo in (("n", n, 2), ("seed", seed, 0), ("bins", bins, 1), ("n_boot", n_boot, 0)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise InputError(f"{name}: must be an integer >= {lo}, got {v!r}.")
    check_alpha(alpha)
    pair = check_pair(pair, system.n_groups, None)

    U = system.units_per_replica
    units = n * U if U > 1 else system.n_groups * n
    check_work(units * T, f"benefit by forks of {n} {'worlds' if U > 1 else 'units per group'} "
               f"over {T} epochs", "lower n or the horizon")
    check_memory(forks_bytes(system, n, T, n_boot), "benefit_fairness_mc",
                 "lower n or the horizon (or n_boot)")
    A, base = system.n_actions, system.decisions.baseline
    # anything the other doors take (a built-in name, a table, a checkpoint...), as they do
    policy = resolved(policy, system)
    pname = getattr(policy, "name", type(policy).__name__)
    if check and (shared or {}).get(("cells", bins, n_boot)) is None:  # once per policy
        check_policy_state(policy, system.make_simulator(), A, pname, units=U)
    policy = engine_policy(policy, system, A, horizon=T, device=engine_device(device))
    stats = (shared or {}).get(("cells", bins, n_boot))
    if stats is None:  # what every pair shares: the cells, their means, the replicates'
        stats = _cell_stats(system, policy, T, n, seed, bins, n_boot, pname, jobs, backend,
                            rollout, shared)
        if shared is not None:
            shared[("cells", bins, n_boot)] = stats
    K, labels, desc, delta, prob, w, reps, most, direct = stats
    # "auto": from the point estimates of the benefits of the visited cells (an unvisited
    # cell has no estimate; auto_eps drops NaN), the same eps for every replicate
    eps, eps_source = resolve_eps(
        eps, np.delete(np.where(w[..., None] > 0, delta, np.nan), base, axis=-1), eps_source)
    a_, b_ = pair
    # the cells each group of the pair visits: a replicate visits no other (its weights
    # resample these visits), and a pair term with a cell one group does not visit is
    # + 0 (its weight), so the terms are computed over these cells only and put in a
    # K x K array of zeros: the same array, so the same sums, as over every cell pair
    ra, rb = np.flatnonzero(w[a_] > 0), np.flatnonzero(w[b_] > 0)
    block = np.ix_(ra, rb)
    whole = len(ra) == K and len(rb) == K  # both visit every cell: the block is the array

    def signed_gaps(delta: np.ndarray) -> np.ndarray:
        """The benefit gaps of the pairs of cells, action-major (A, len(ra), len(rb)): one
        action's gaps are contiguous (a short last axis costs numpy several times more)."""
        da = np.ascontiguousarray(delta[a_][ra].T)
        return da[:, :, None] - np.ascontiguousarray(delta[b_][rb].T)[:, None, :]

    def terms(delta: np.ndarray, prob: np.ndarray, w: np.ndarray,
              *masks: np.ndarray | str | None, tangent: Callable | None = None) -> list:
        """Per-pair Lambda terms (K, K), one array per mask (None, an (A, len(ra), len(rb))
        block zeroing benefit gaps, or ``"own"``: :func:`pretest` on these gaps, a
        bootstrap replicate's own mask), then ``tangent``'s plug-in sum if given
        (:func:`plugin_tangent`): the total variations and gaps are computed once for all,
        and the largest gap over the actions by elementwise maxima (exact, so the same
        bits as a max over the actions' axis, several times faster for a few actions)."""
        tv = total_variation(prob[a_][ra], prob[b_][rb])
        signed = signed_gaps(delta)
        gap = np.abs(signed)
        wa, wb = w[a_][ra][:, None], w[b_][rb][None, :]
        out: list = []
        for mask in masks:
            mask = pretest(gap, cut) if isinstance(mask, str) else mask
            g = gap if mask is None else np.where(mask, 0.0, gap)
            top = g[0].copy()
            for a in range(1, A):
                np.maximum(top, g[a], out=top)
            part = eps * tv / (eps + top) * wa * wb
            if not whole:
                full = np.zeros((K, K))
                full[block] = part
                part = full
            out.append(part)
        if tangent is not None:
            out.append(tangent(np.moveaxis(signed, 0, -1), tv, wa * wb))
        return out

    mask = None
    if n_boot >= 2:
        R = len(reps)
        # every replicate's gaps of a block of a_'s cells at once, (R, A, rows, len(rb)), in
        # blocks of at most 2^18 numbers (2 MiB) on threads; numpy sums an array over its
        # first axis in that axis' order, so these are the running sums over the
        # replicates in order of np.stack(gaps).std(axis=0, ddof=1), the same bits
        da_r = np.stack([np.ascontiguousarray(r[0][a_][ra].T) for r in reps])
        db_r = np.stack([np.ascontiguousarray(r[0][b_][rb].T) for r in reps])[:, :, None, :]
        step = max(1, min(len(ra), (1 << 18) // max(1, R * A * len(rb))))

        def gap_se_rows(lo: int) -> np.ndarray:
            g = da_r[:, :, lo:lo + step, None] - db_r
            mean = g.sum(0) / R
            g -= mean
            g *= g
            return np.sqrt(g.sum(0) / (R - 1))

        gap_se = np.concatenate(list(engine_backend(None, jobs).imap(
            gap_se_rows, range(0, len(ra) or 1, step))), axis=1)
        cut = np.sqrt(np.log(n)) * gap_se
        signed = signed_gaps(delta)
        gap_hat = np.abs(signed)
        mask = pretest(gap_hat, cut)
    contrib, plain = terms(delta, prob, w, mask, None)
    lam = float(contrib.sum())
    se = ci = None
    if n_boot >= 2:
        tangent = plugin_tangent(np.moveaxis(signed, 0, -1), np.moveaxis(gap_hat, 0, -1),
                                 base, eps)

        def replicate(r: tuple[np.ndarray, ...]) -> tuple[float, float]:
            # its own pre-test (point 4), the plug-in by its tangent (point 5)
            thr_r, plug_r = terms(*r, "own", tangent=tangent)
            return float(thr_r.sum()), plug_r

        # independent replicates: the same sums on threads
        each = engine_backend(None, jobs).imap(replicate, reps)
        thr, plug = (np.array(x) for x in zip(*each, strict=True))
        se = float(thr.std(ddof=1))
        ci = lambda_hull([(lam, se), (float(plain.sum()), float(plug.std(ddof=1)))], alpha,
                         rounding_bound(most, delta, eps))
    binary = A == 2 and base == 0
    a, b = pair
    return BenefitResult(
        Lambda=lam, eps=eps, eps_source=eps_source, weights="visitation",
        delta=delta[..., 1] if binary else delta,
        p_d1=prob[..., 1] if binary else prob,
        state_weights=w, contributions=contrib, pair=(a, b), groups=system.groups,
        levels=labels, dpe_prop1=float(direct[a] - direct[b]),
        actions=system.decisions.labels, method="mc", se=se, ci=ci,
        ci_level=1 - alpha if ci is not None else None, cells=desc, visited=w > 0,
        departed=tuple(system.departed or ()) if desc == "levels" else (),
    )


def pretest(gap: np.ndarray, cut: np.ndarray) -> np.ndarray:
    """The pre-test of the thresholded Lambda (module docstring, point 4; the log audit's,
    :func:`causalfair.logs.pretest.threshold_lambda`, for benefit and policy gaps): True
    where a gap's magnitude ``gap`` (pairs of cells of the two groups, per action) is
    within ``cut`` (sqrt(log n) times its bootstrap standard error) of 0, so set to 0. Run
    on the estimate's gaps and on every bootstrap replicate's, against the same ``cut``:
    the mask is part of the estimator (held fixed, a zeroed gap added nothing to the
    replicates' spread). A gap with ``cut`` 0 (standard error 0: a known quantity, such as
    a supplied policy's gap or the baseline's column) is never masked (masking a gap of 0
    would change no number, only the count of masked gaps)."""
    return (cut > 0) & (gap <= cut)


def plugin_tangent(signed: np.ndarray, gap: np.ndarray, base: int | None,
                   eps: float) -> Callable[[np.ndarray, np.ndarray, np.ndarray], float]:
    """The plug-in Lambda of a bootstrap replicate for its standard error (module
    docstring, point 5), linear in the benefit gaps (the delta method). ``signed`` and
    ``gap``: the estimate's benefit gaps of the pairs of cells (rows: the first group's
    cells, columns: the second's, per action) and their magnitudes. In each pair term the
    factor eps / (eps + |gap|) is replaced by its tangent at the estimate's |gap|, of the
    action where the estimate's |gap| is largest (the baseline's column ``base``, 0, left
    out; None: every column is a benefit, as the log audit's one column of d1 against d0,
    :func:`causalfair.logs.pretest.threshold_lambda`), the replicate's gap taken with the
    estimate's sign. Returns the function of a replicate's signed gaps, total variations
    (two actions: |pi(d1|x,s+) - pi(d1|x',s-)|) and weight products that sums its terms.
    A replicate's |gap| folds at 0: where the true gaps are small but not 0 (lending-harder
    at n = 5,000 per group) its eps / (eps + |gap|) spread less than the estimate does,
    so the plug-in's standard error was too small; the tangent keeps the gap's spread."""
    cols = [k for k in range(signed.shape[-1]) if k != base]
    if len(cols) == 1:  # one benefit column (two actions): it is the active one everywhere
        def active(x: np.ndarray) -> np.ndarray:
            return x[..., cols[0]]
    else:
        col = np.asarray(cols)[gap[..., cols].argmax(-1)[..., None]]  # max_a |gap_a|'s a

        def active(x: np.ndarray) -> np.ndarray:
            return np.take_along_axis(x, col, -1)[..., 0]
    sign = np.where(active(signed) >= 0, 1.0, -1.0)
    at = active(gap)
    level = eps / (eps + at)
    slope = level / (eps + at)  # = eps / (eps + at)^2, without squaring a large eps

    def plug(signed_r: np.ndarray, tv: np.ndarray, ww: np.ndarray) -> float:
        moved = sign * active(signed_r) - at
        return float(((level - slope * moved) * tv * ww).sum())

    return plug


def _cell_stats(system: Any, policy: Any, T: int, n: int, seed: int, bins: int,
                n_boot: int, pname: str, jobs: Any, backend: Any, rollout: Any,
                shared: dict | None) -> tuple:
    """What every pair of groups shares in :func:`benefit_fairness_mc`: the rollout (kept
    in ``shared["rollout"]``), the cells, every group's cell means (benefits, action
    distributions, visitation weights) and the same of every bootstrap replicate:
    (K, labels, description, delta (G, K, A), prob (G, K, A), w (G, K), replicates, the
    most visits of a group in one cell, each group's sum_t E[sum_a pi(a) Delta_a] (G,): the
    DPE's Proposition-1 terms, the mean over the visits of each visit's own products, not
    of the cells' means, which differ where the policy and the benefit vary together
    within a cell (features finer than the cells); a departed visit's benefit is 0)."""
    A, G, U = system.n_actions, system.n_groups, system.units_per_replica
    per_world = U > 1  # coupled units: one weight per world, the same for every group
    Gw = 1 if per_world else G  # weight matrices: W[0 if per_world else g] is group g's

    def resample(R: int) -> np.ndarray:
        """The bootstrap's Poisson(1) weights, (Gw, R, n), from one stream, in place: replicate
        r draws one weight per individual of each group in turn (coupled units: per world)."""
        # one byte a weight (a Poisson(1) draw over 255 has probability under 1e-500), an
        # eighth of float64's; each product takes a float64 copy of its block: the same numbers
        rng_b, out = seeded_rng(seed, STREAM, 99), np.empty((Gw, R, n), dtype=np.uint8)
        for r in range(R):
            for g in range(Gw):
                out[g, r] = rng_b.poisson(1.0, size=n)
        return out

    # one stream, so one thread draws them, beside the groups' rollouts and the driver's
    # search for the visited cells (numpy's generators release the GIL)
    drawn = _beside(resample, n_boot, jobs=jobs)
    # ``rollout``: another estimator of each visit's benefit with rollout_units' outputs
    # (causalfair.engines.benefit_horizon: the benefit to the horizon, Lambda_T)
    outs = (shared or {}).get("rollout") or (
        (rollout(system, policy, T, n, seed, pname, jobs) if rollout is not None else
         rollout_units(system, policy, T, n, seed, pname, jobs, backend)) if U == 1 else
        rollout_coupled(system, policy, T, n, seed, pname))
    if shared is not None:
        shared["rollout"] = outs
    lev_g, feat_g, delta_g, prob_g, unit_g = outs
    kept = [1.0] * G
    departed = getattr(system, "departed", None)
    if departed and lev_g is not None:  # those present (the visits at departed levels dropped)
        counts = [len(lev) for lev in lev_g]
        lev_g, feat_g, delta_g, prob_g, unit_g = _present(outs, departed)
        kept = [len(lev) / c if c else 1.0 for lev, c in zip(lev_g, counts, strict=True)]
        if empty := [g for g, lev in enumerate(lev_g) if len(lev) == 0]:
            raise InputError(_nobody_present(system, empty[0], n, departed))
    for g, dg in enumerate(delta_g):  # forks the decomposition's paths need not take
        if not np.isfinite(dg).all():
            raise SimulatorContractError(
                f"system {system.id!r}: its simulator's step returned NaN or inf gains in a "
                f"benefit fork (group {system.groups[g]!r}: "
                f"{int((~np.isfinite(dg)).sum())} of {dg.size} benefits); every action must "
                "give a finite gain from every state.")
    if lev_g is None and feat_g is None:
        raise InputError(
            f"benefit_fairness_mc: system {system.id!r} observes neither levels nor features; "
            "benefit fairness pairs individuals through them.")
    named = dict.fromkeys(group_features(system), tuple(system.groups))  # "group=B", not "=1"
    cells, K, labels, desc = visit_cells(lev_g, feat_g, bins, system.features, system.n_levels,
                                         system.levels, named)
    # the K x K pair terms (at most K^2 pairs of visited cells, per action)
    check_memory(pair_bytes(K, A, n_boot, jobs), "benefit_fairness_mc",
                 f"the {K} cells ({desc}) make {K * K} pairs; lower the quantile bins per "
                 f"feature (now {bins}: benefit_bins= in Python, --benefit-bins on the command "
                 "line, [benefit] bins in a spec)")
    cols = (cells, unit_g, delta_g, prob_g, K, A)
    delta, prob, w = _cell_means(cols)
    W = drawn()
    reps = _replicates(cols, W, per_world, n, jobs) if n_boot else []
    most = max((int(np.bincount(c).max()) for c in cells if c.size), default=0)
    # every visit's own pi x Delta, averaged over the visits present, times the share of
    # visits kept (a departed visit adds 0) and T: sum_t E[sum_a pi(a | x_t) Delta_a(x_t)]
    direct = np.array([float((prob_g[g] * delta_g[g]).sum()) / max(len(delta_g[g]), 1) * T
                       * kept[g] for g in range(G)])
    return K, labels, desc, delta, prob, w, reps, most, direct


def pair_bytes(K: int, A: int, n_boot: int, jobs: Any) -> float:
    """Bytes the pair terms of ``K`` cells and ``A`` actions hold at once, 32 (A + 2) K^2
    for the estimate's gaps, their bootstrap standard errors, cut and pre-test, the
    tangent and the two K x K sums, and as much again on each thread that runs a replicate
    (min(jobs, n_boot), none without a bootstrap; the replicates are summed as they go,
    none is kept): its gaps, masked gaps and the total variations' temporaries. Measured
    (tracemalloc, 256 cells, two actions, 200 replicates): 14.3, 20.9 and 33.7 MiB with 1,
    2 and 4 threads against 16, 24 and 40; 5.6 against 8 without a bootstrap."""
    threads = min(resolve_jobs(jobs, "jobs"), n_boot) if n_boot >= 2 else 0
    return 8.0 * K * K * (A + 2) * 4 * (1 + threads)


def _nobody_present(system: Any, g: int, n: int, departed: tuple[int, ...]) -> str:
    """The refusal of a group of which the sample holds nobody present at any step (a
    group present at the start in a share under about 1/n; the tabular model's and the
    contract's refusal of a group with nobody present at all is
    :func:`causalfair.model.empty_group_message`)."""
    labels = tuple(system.levels[k] for k in departed) if system.levels else tuple(departed)
    units = "units" if system.units_per_replica == 1 else "worlds' units"
    return (f"n: bad value {n} for group {system.groups[g]!r}: all {n} of its sampled {units} "
            f"are at the departed levels {labels!r} at every step (few of the group are present "
            "at the start), so Lambda has nobody of it to pair; raise n (n= in Python, --n on "
            "the command line, [engine] n in a spec) until the sample holds some of it, or use "
            "the exact engine where the system has a tabular model.")


def _present(outs: tuple, departed: tuple[int, ...] | None) -> tuple:
    """The rollout's visits of those present: with ``departed`` (the system's departed
    levels) the visits at those levels dropped, so each group's visitation weights are
    renormalised over the present visits (the exact engine's ``present_weights``)."""
    lev_g = outs[0]
    keep = [~np.isin(np.asarray(lev), departed) for lev in lev_g]
    return tuple(None if col is None else
                 [np.asarray(c)[k] for c, k in zip(col, keep, strict=True)] for col in outs)


def _cell_means(cols: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (group, cell): the mean benefit and action distribution over its visits and the
    visitation weight. ``cols``: (cells, units, benefits, distributions per group, K, A);
    a bootstrap replicate's, with its units' weights: :func:`_replicates`."""
    cells, _, delta_g, prob_g, K, A = cols
    G = len(cells)
    delta = np.zeros((G, K, A))
    prob = np.zeros((G, K, A))
    w = np.zeros((G, K))
    for g in range(G):
        mass = np.bincount(cells[g], minlength=K).astype(float)
        w[g] = mass / max(mass.sum(), 1e-300)
        safe = np.where(mass > 0, mass, 1.0)
        for a in range(A):
            delta[g, :, a] = np.bincount(cells[g], weights=delta_g[g][:, a], minlength=K) / safe
            prob[g, :, a] = np.bincount(cells[g], weights=prob_g[g][:, a], minlength=K) / safe
    return delta, prob, w


def _replicates(cols: tuple, W: np.ndarray, per_world: bool, n: int, jobs: Any
                ) -> list[tuple[np.ndarray, ...]]:
    """:func:`_cell_means` of every bootstrap replicate, each visit weighted by its unit's
    weight, all at once by products with the
    Poisson weights ``W`` (replicates x units per group; coupled units: worlds) instead of
    a pass over the visits per replicate. Per group, each (cell, unit) pair its visits hold
    gets the sums of its visits' 1 + 2A columns (count, benefits, probabilities), each in
    visit order; a cell's sums in every replicate are then one product, those pairs' sums
    (pairs of the cell in unit order) times their units' weights. That is the product of
    the weights with each unit's sums per cell without its zeros: a unit visits at most
    one cell a step, so with 256 feature cells over 20 steps over 92% of those sums are 0
    (n = 20,000: 0.3 s instead of 1.0 s, and no 205 MB array of them). The cells run in
    blocks on threads (:func:`_blocks`), a cell's replicates in blocks of at most 2^18
    weights (2 MiB as float64, on each thread), both fixed by the sizes: the same numbers whatever
    ``jobs``."""
    cells, unit_g, delta_g, prob_g, K, A = cols
    G = len(cells)
    R, C = W.shape[1], 1 + 2 * A
    d_r, p_r, w_r = np.zeros((R, G, K, A)), np.zeros((R, G, K, A)), np.zeros((R, G, K))
    backend = engine_backend(None, jobs)
    for g in range(G):
        pairs, inv = np.unique(np.asarray(cells[g], dtype=np.int64) * n + unit_g[g],
                               return_inverse=True)  # sorted: by cell, then by unit
        P = len(pairs)
        sums_p = np.empty((P, C))
        sums_p[:, 0] = np.bincount(inv, minlength=P)
        for a in range(A):
            sums_p[:, 1 + a] = np.bincount(inv, weights=delta_g[g][:, a], minlength=P)
            sums_p[:, 1 + A + a] = np.bincount(inv, weights=prob_g[g][:, a], minlength=P)
        del inv
        unit, start = pairs % n, np.searchsorted(pairs, np.arange(K + 1) * n)
        del pairs
        wt = np.ascontiguousarray(W[0 if per_world else g].T)  # a unit's weights in a row
        sums = np.zeros((R, K, C))

        def cell_sums(ks: tuple[int, int], unit=unit, start=start, sums_p=sums_p, wt=wt,
                      sums=sums) -> None:
            for k in range(*ks):
                lo, hi = int(start[k]), int(start[k + 1])
                step = max(1, (1 << 18) // max(1, hi - lo))
                for r in range(0, R if hi > lo else 0, step):
                    sums[r:r + step, k] = (sums_p[lo:hi].T
                                           @ wt[unit[lo:hi], r:r + step].astype(float)).T

        for _ in backend.imap(cell_sums, _blocks(K, 1)):
            pass
        del unit, start, sums_p, wt, cell_sums  # cell_sums' defaults held them
        mass = sums[..., 0]
        w_r[:, g] = mass / np.maximum(mass.sum(1, keepdims=True), 1e-300)
        safe = np.where(mass > 0, mass, 1.0)[..., None]
        d_r[:, g] = sums[..., 1:1 + A] / safe
        p_r[:, g] = sums[..., 1 + A:] / safe
    return [(d_r[r], p_r[r], w_r[r]) for r in range(R)]


def _beside(fn: Callable[..., Any], *args: Any, jobs: Any) -> Callable[[], Any]:
    """``fn(*args)`` on a thread of its own while the caller goes on, when ``jobs`` allows
    more than one thread (else here, now); returns the function that waits for its result
    (raising what it raised)."""
    if resolve_jobs(jobs, "jobs") <= 1:
        out = fn(*args)
        return lambda: out
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["out"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - raised where the result is taken
            box["exc"] = exc

    th = threading.Thread(target=run, name="causalfair-benefit-weights", daemon=True)
    th.start()

    def result() -> Any:
        th.join()
        if "exc" in box:
            raise box["exc"]
        return box["out"]

    return result


def system_benefit(system: Any, policy: Any, horizon: int | None = None, *,
                   engine: str = "auto", n: int = 20_000, seed: int = 0,
                   eps: float | str | None = None,
                   weights: str = "visitation", alpha: float = 0.05,
                   pair: tuple[int, int] = (0, 1), jobs: Any = "auto",
                   eps_source: str | None = None, device: str | None = None,
                   bins: int = 4, backend: Any = None, shared: dict | None = None,
                   check: bool = True) -> BenefitResult | None:
    """Benefit fairness of ``policy`` on ``system`` (anything
    :func:`~causalfair.systems.as_system` accepts) by the engine the system supports
    (:func:`~causalfair._validation.engine_for`): exact from its tabular model of
    independent units (:func:`causalfair.engines.benefit.benefit_fairness`), else by forks
    (:func:`benefit_fairness_mc`: ``n`` units per group or worlds, bootstrap interval at
    level 1 - ``alpha``, ``bins`` quantile bins per feature). None when the observations
    carry neither levels nor features (nothing pairs individuals). ``horizon``: default
    the system's. ``shared``: as for :func:`benefit_fairness_mc`. ``check=False``: the
    caller has settled the simulator contract (a Monte Carlo decomposition's own run)."""
    system = as_system(system)
    T = check_horizon(system.horizon if horizon is None else horizon)
    eps, declared = eps_for(eps, system)  # None: what the system declares, else "auto"
    eps_source = eps_source or declared
    kind = engine_for(system, engine, check=check)
    if kind == "exact":
        return benefit_fairness(system.tabular, policy, T, eps=eps, weights=weights, pair=pair,
                                eps_source=eps_source)
    check_weights(weights, kind)  # by forks: "visitation" only
    if system.n_levels is None and system.features is None:
        return None
    return benefit_fairness_mc(system, policy, T, n=n, seed=seed, eps=eps, alpha=alpha,
                               pair=pair, jobs=jobs, eps_source=eps_source, device=device,
                               bins=bins, backend=backend, shared=shared, check=check)
