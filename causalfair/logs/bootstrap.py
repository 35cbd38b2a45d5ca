"""The fit of a decision log's tabular model from its per-individual statistics (weighted
or not: :func:`fit_model`) and the bootstrap over individuals (:func:`bootstrap_logs`,
:func:`bootstrap_replicates`): seeded resamples, each refitted and audited by the exact
engine, with the Lambda inputs of every replicate."""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair._limits import check_memory, max_memory
from causalfair.engines._mc_base import check_work
from causalfair.engines.benefit import check_eps, lambda_pairs, model_eps, weights_and_policy
from causalfair.engines.effects import decompose
from causalfair.engines.groups import PAIR_BYTES  # a pair of the comparison, every door's
from causalfair.errors import first_line
from causalfair.logs.errors import LogError
from causalfair.logs.fit import DEFAULT_ALPHA, LogStats, fit_counts, fit_multinomial, fit_ordinal
from causalfair.logs.pretest import check_lambda_estimator, estimate_lambda

__all__ = ["fit_model", "bootstrap_replicates", "bootstrap_logs", "check_boot_memory"]


def fit_model(stats: LogStats, vec: np.ndarray, *, method: str, alpha: float, potential: Any,
         groups: tuple[str, ...], start: Any = None, levels: tuple[str, ...] | None = None):
    kernel = None
    params = None
    if method in ("ordinal", "multinomial"):
        trans = stats.unpack(vec)["trans"]
        fit = fit_ordinal if method == "ordinal" else fit_multinomial
        kernel, params = fit(trans, start=start)
    model, p_log = fit_counts(stats, vec, alpha=alpha, potential=potential, groups=groups,
                              kernel=kernel, levels=levels)
    return model, p_log, params


def _replicate(model: Any, p: np.ndarray, horizon: int, eps: float, weights: str,
               pair: tuple[int, int] | None):
    """One replicate: the row of scalar quantities and the Lambda inputs (p_bar, Delta,
    P(x | s)), each (G, K)."""
    dec = decompose(model, p, horizon, eps=eps, weights=weights, pair=pair)
    row = dec.estimates()
    row["Lambda"] = float(dec.Lambda)
    d = model.benefit()
    for i, g in enumerate(model.group_names):
        for x, lab in enumerate(model.level_labels):
            row[f"Delta[{g},{lab}]"] = float(d[i, x])
    w, p_bar = weights_and_policy(model, np.asarray(p, dtype=np.float64), horizon, weights, None)
    return row, p_bar, d, w


def bootstrap_replicates(stats: LogStats, *, n_boot: int, seed: int, horizon: int,
               policy: np.ndarray | None, method: str, alpha: float, potential: Any,
               groups: tuple[str, ...], eps: float, weights: str, chunk: int,
               start: Any, pair: tuple[int, int] | None,
               levels: tuple[str, ...] | None = None):
    """Replicate rows (DataFrame, plug-in Lambda) and the arrays (B, G, K) of p_bar,
    Delta and P(x | s) per replicate."""
    import pandas as pd

    n = stats.n_individuals
    rng = np.random.default_rng(seed)
    chunk = _boot_chunk(chunk, n, stats.matrix.shape[1])
    rows: list[dict] = []
    arrays: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    drawn, why = 0, ""
    while len(rows) < n_boot:
        if drawn >= _MAX_REDRAWS * n_boot:  # most resamples cannot be fitted: never loop on
            raise LogError(
                f"logs: only {len(rows)} of {drawn} bootstrap resamples of the individuals "
                f"could be fitted (the others: {why}); a group or level with very few "
                "individuals is left out of most resamples: merge or drop it, or audit "
                "without intervals (n_boot=0; CLI --boot 0).")
        b = min(chunk, n_boot - len(rows))
        drawn += b
        W = np.zeros((b, n))
        for k in range(b):  # row by row: the same draws as one (b, n) call, O(n) at a time
            W[k] = np.bincount(rng.integers(0, n, size=n), minlength=n)
        tot = stats.total(W)
        del W
        for k in range(b):
            try:
                model, p_log, _ = fit_model(stats, tot[k], method=method, alpha=alpha,
                                       potential=potential, groups=groups, start=start,
                                       levels=levels)
            except LogError as exc:  # e.g. a resample without some group: drawn again
                why = first_line(str(exc)) if str(exc) else type(exc).__name__
                continue
            row, *arr = _replicate(model, p_log if policy is None else policy, horizon,
                                   eps, weights, pair)
            rows.append(row)
            arrays.append(tuple(arr))
    G, K = stats.n_groups, stats.n_levels
    stacked = tuple(np.stack([a[j] for a in arrays]) if arrays else np.zeros((0, G, K))
                    for j in range(3))
    return pd.DataFrame(rows), stacked


#: Resamples drawn per replicate kept, at most, before the bootstrap gives up (a
#: resample that cannot be fitted, e.g. one without some group, is drawn again).
_MAX_REDRAWS = 20


#: Memory of one pair of groups of a log audit's every-pair comparison per bootstrap
#: replicate, beside its :data:`~causalfair.engines.groups.PAIR_BYTES` (measured with 80
#: groups: 1.9 KiB a pair and 240 bytes a pair and replicate at the comparison's peak; the
#: audit keeps one comparison and its summary builds another).
PAIR_REPLICATE_BYTES = 256


def check_boot_memory(n_boot: int, n_groups: int, n_levels: int, where: str = "audit_logs",
                      *, compared: bool = True) -> None:
    """Refuse, before the fit, ``n_boot`` replicates whose results would not fit the memory
    limit: each keeps its row (about 20 + G K columns, built as a dict of floats, about
    100 bytes a column), its arrays p_bar, Delta and P(x | s) (3 G K floats, twice while
    they are stacked) and, in the pre-test, about six (K, K) arrays (measured on lending-1,
    2 groups x 7 levels: 4.9 KiB a replicate at the peak, this estimate 6.6 KiB). With
    more than two groups and ``compared`` (:func:`~causalfair.logs.audit.audit_logs`
    compares every pair: :func:`causalfair.logs.groups.compare_log_groups`) the pairs too:
    G (G - 1) / 2 of them, each :data:`~causalfair.engines.groups.PAIR_BYTES` plus :data:`PAIR_REPLICATE_BYTES` a
    replicate (its quantities' values over the replicates, as Python floats)."""
    G, K = int(n_groups), int(n_levels)
    per = 100 * (20 + G * K) + 8 * 6 * G * K + 8 * 6 * K * K
    pairs = G * (G - 1) // 2 if compared and G > 2 else 0
    need = float(n_boot) * per + pairs * (PAIR_BYTES + float(n_boot) * PAIR_REPLICATE_BYTES)
    check_memory(need, f"{where}: n_boot={int(n_boot)} bootstrap replicates of a model of {G} "
                 f"groups x {K} levels" + (f" compared in {pairs} pairs" if pairs else ""),
                 "lower n_boot (default 200; CLI --boot, spec [logs] n_boot)"
                 + (" or merge groups (G groups make G(G-1)/2 pairs)" if pairs else ""))


#: A bootstrap replicate's own cost (its fit, pre-test and row: about 5 ms on lending-1),
#: counted as the individual-epochs that take as long (:func:`check_boot_work`).
REPLICATE_STEPS = 400_000


def check_boot_work(n_boot: int, n_individuals: int, horizon: int,
                    where: str = "audit_logs") -> None:
    """Refuse, before the fit, a bootstrap whose time is over the work limit
    (:func:`~causalfair.engines._mc_base.check_work`): each replicate reweights every
    individual's visits: individuals x epochs a replicate (about 13 ns each, measured on
    lending-1 logs), plus :data:`REPLICATE_STEPS` for its fit and pre-test (about 5 ms),
    which :func:`check_boot_memory` does not bound (600,000 replicates of a log of
    500,000 individuals over 20 epochs fit the memory: 30 hours)."""
    check_work(int(n_boot) * (int(n_individuals) * int(horizon) + REPLICATE_STEPS),
               f"{where}: bootstrap of {int(n_boot)} replicates of a log of {int(n_individuals)}"
               f" individuals over {int(horizon)} epochs", "lower n_boot (default 200; CLI "
               "--boot, spec [logs] n_boot)")


def _boot_chunk(chunk: int, n: int, cells: int) -> int:
    """Replicates weighted at once: at most ``chunk``, fewer when their weights (B, n) and
    sums (B, cells) would take over a quarter of the memory limit (the draws are made
    replicate by replicate, so the chunk does not change the numbers); one replicate's
    arrays over the limit are refused."""
    per = 8 * (2 * n + cells)  # one replicate: weights, its draws, its cell sums
    check_memory(per, f"logs: a bootstrap replicate of {n} individuals x {cells} cells",
                 "audit a sample of the individuals or bin the state into fewer levels")
    return max(1, min(int(chunk), max_memory() // 4 // per))


def bootstrap_logs(stats: LogStats, *, n_boot: int, seed: int, horizon: int,
                   policy: np.ndarray | None, method: str = "counts",
                   alpha: float = DEFAULT_ALPHA, potential: Any = None,
                   groups: tuple[str, ...], eps: float | str | None = None,
                   weights: str = "visitation",
                   chunk: int = 50, start: Any = None, pair: tuple[int, int] | None = None,
                   lambda_estimator: str = "thresholded",
                   levels: tuple[str, ...] | None = None) -> Any:
    """Bootstrap over individuals: ``n_boot`` replicates, one row each (DataFrame).

    Replicate b draws n individuals with replacement (``rng.integers``; counts by
    ``bincount``) and refits from the weighted per-individual statistics. ``policy``:
    a fixed table to audit, or None to re-estimate the logged policy in each replicate.
    A replicate in which some group has no individual is redrawn (never happens at
    realistic sizes). Seeded: same seed, same table.

    The ``Lambda`` column holds the replicates of the ``lambda_estimator``
    ("thresholded", the default, or "plugin"); with >= 2 replicates the columns
    ``Lambda[plugin]`` and ``Lambda[thresholded]`` hold both: each replicate's thresholded
    Lambda (its own pre-test against the cuts c_n x the replicates' standard errors) and
    the plug-in's tangent replicates, linear in the benefit gaps (see
    :func:`~causalfair.logs.pretest.threshold_lambda`; the estimate comes from the
    full-data fit, which this function computes).
    """
    requested = check_lambda_estimator(lambda_estimator)
    if eps is not None:
        check_eps(eps)
    check_boot_memory(n_boot, stats.n_groups, stats.n_levels, "bootstrap_logs", compared=False)
    check_boot_work(n_boot, stats.n_individuals, horizon, "bootstrap_logs")
    model, p_log, params = fit_model(stats, stats.total(), method=method, alpha=alpha,
                                potential=potential, groups=groups, start=start, levels=levels)
    eps = model_eps(eps, model)[0]  # one number for every replicate
    p = p_log if policy is None else np.asarray(policy, dtype=np.float64)
    if pair is None:
        pair = decompose(model, p, horizon, eps=eps, weights=weights).pair
    boot, arrays = bootstrap_replicates(stats, n_boot=n_boot, seed=seed, horizon=horizon, policy=policy,
                              method=method, alpha=alpha, potential=potential, groups=groups,
                              eps=eps, weights=weights, chunk=chunk,
                              start=params if start is None else start, pair=pair,
                              levels=levels)
    w, p_bar = weights_and_policy(model, p, horizon, weights, None)
    delta = model.benefit()

    contrib = lambda_pairs(p_bar, delta, w, pair, eps)
    estimate_lambda(requested, boot, arrays, (p_bar, delta, w), n=stats.n_individuals,
                     pair=pair, eps=eps, plugin_value=float(contrib.sum()),
                     plugin_contrib=contrib, levels=tuple(model.level_labels),
                     groups=tuple(model.group_names))
    return boot
