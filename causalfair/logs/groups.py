"""More than two groups from decision logs: every group against a reference group, every
pair, the worst pair (docs/logs.md, "More than two groups"; docs/decomposition.md, "More
than two groups").

The pair arithmetic, the names ``"A-B"``, the reference pairs, the ratios and the worst
pair are those of :func:`causalfair.engines.groups.compare`, applied to the decomposition
of the fitted model (the point estimates) and to the decomposition of each bootstrap
replicate (rebuilt from the replicate's per-group values ``V[g]``, ``V_ps[g]``, ``V_0[g]``,
``utility[g]``, which :func:`causalfair.logs.audit.audit_logs` already computes): every
pair's numbers come from the same replicates, with no extra fit. A pair quantity's
interval is the log audit's rule for every quantity its verdicts judge: estimate +- z *
the bootstrap standard deviation of that pair quantity over the replicates (ratios clipped
to [0, 1]). Resampling individuals keeps the correlation between groups that a shared fit
may carry, which se_a (+) se_b would not. Without replicates (n_boot < 2) every pair and
group quantity is an estimate with no interval (lower = upper = None: null in JSON, n/a in
text), as the two-group log audit shows none; only ``ratio_selection``, whose interval
comes from the log's counts, keeps one.

Lambda of a pair: the log audit's estimator (:func:`causalfair.logs.pretest.threshold_lambda`
on the pair, the thresholding mask from that pair's own bootstrap standard errors) with the
log audit's interval (:func:`causalfair.logs.pretest.lambda_interval_of`, normal: the
hull of the thresholded and plug-in intervals); on the audited pair it is the audit's
Lambda. ``ratio_selection`` comes from the selection rates observed in the log, its interval
from their counts (the standard errors ``se_selected`` of :mod:`causalfair.engines.selection`,
by :func:`~causalfair.engines.groups.compare`). The audited pair, when the data chose it (more than two groups, no ``pair=``), has
its C, DPE, IPE, SPE and ratio_V intervals simultaneous over the pairs
(:mod:`causalfair._simultaneous`), as the decomposition's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from causalfair._simultaneous import pair_z
from causalfair._validation import z_quantile
from causalfair.engines.benefit import lambda_pairs
from causalfair.engines.groups import (
    EFFECTS,
    GroupComparison,
    compare,
    no_interval,
    split_pair,
)
from causalfair.engines.pair_work import PAIR_BASE_TERMS, check_pair_work
from causalfair.logs.errors import LogError
from causalfair.logs.pretest import lambda_interval_of, lambda_threshold_c, threshold_lambda

__all__ = ["compare_log_groups", "PER_GROUP"]

#: The per-group values a bootstrap row holds (``V[g]`` ...) and the Decomposition field of each.
PER_GROUP: dict[str, str] = {"V": "V", "V_ps": "V_ps", "V_0": "V_0",
                             "utility": "utility_by_group"}
_BOOTSTRAPPED = (*EFFECTS, "ratio_V")


def compare_log_groups(dec: Any, *, bootstrap: Any, benefit: Any, lambda_estimate: Any,
                       replicate_arrays: Any, reference: Any = None, alpha: float = 0.05,
                       selection: Mapping[str, Any] | None = None) -> GroupComparison:
    """Every group against ``reference`` (a group name or index; default the first) and
    every pair of a log audit, with bootstrap intervals at level 1 - ``alpha``.

    ``dec``: the log audit's Decomposition (``se``: bootstrap standard deviations, which
    give the per-group intervals); ``bootstrap``: its replicate rows (or None);
    ``benefit``: its BenefitResult (the full-data pi(d1 | x, s), Delta(x, s), P(x | s) of
    Lambda); ``lambda_estimate``: its LambdaEstimate; ``replicate_arrays``: the same three
    arrays per replicate, (B, G, K) each, aligned with the rows of ``bootstrap``;
    ``selection``: the selection rates observed in the log (for ``ratio_selection``).
    Use :meth:`causalfair.logs.LogAudit.compare_groups`, which passes these."""
    if dec is None:
        raise LogError("logs: the effects are not identified (positivity); no per-pair "
                       "comparison; read .bounds instead.")
    has_reps = bootstrap is not None and len(bootstrap) >= 2
    _check_work(dec, benefit, lambda_estimate, len(bootstrap) if has_reps else 0)
    point = compare(dec, reference=reference, alpha=alpha, selection=selection)
    z = z_quantile(alpha)
    reps: dict[str, dict[str, list[float | None]]] = {p: {k: [] for k in _BOOTSTRAPPED}
                                                      for p in point.pairs}
    if has_reps:
        groups = dec.groups
        cols = {k: bootstrap[[f"{k}[{g}]" for g in groups]].to_numpy(dtype=np.float64)
                for k in PER_GROUP}
        for b in range(len(bootstrap)):
            rep = dataclasses.replace(dec, se=None, Lambda=None, **{
                field: cols[k][b] for k, field in PER_GROUP.items()})
            rc = compare(rep, reference=point.reference, alpha=alpha)
            for p, q in rc.pairs.items():
                for k in _BOOTSTRAPPED:
                    reps[p][k].append(None if q[k] is None else q[k][0])
    pairs: dict[str, dict[str, Any]] = {}
    for p, q in point.pairs.items():
        out = dict(q)
        zp = pair_z(alpha, point.simultaneous) if p == point.chosen else z  # data-chosen pair
        for k in _BOOTSTRAPPED:
            out[k] = _boot_q(q[k], reps[p][k], zp, k.startswith("ratio_"))
        out["Lambda"] = _pair_lambda(p, dec, benefit, lambda_estimate, replicate_arrays,
                                     alpha, has_reps)
        pairs[p] = out
    per_group = point.per_group if has_reps else {  # the counts' selection keeps its own
        g: {k: q if k == "selection" else no_interval(q) for k, q in vals.items()}
        for g, vals in point.per_group.items()}
    return dataclasses.replace(point, pairs=pairs, per_group=per_group)


def _check_work(dec: Any, benefit: Any, lam: Any, B: int) -> None:
    """Refuse, before any pair is computed, a comparison whose work is over the limit
    (:func:`~causalfair.engines.pair_work.check_pair_work`): every pair's quantities again
    for each of the ``B`` bootstrap replicates, and its Lambda over the K x K levels for the
    estimate and each replicate (four arrays of terms: gaps, pre-test, plug-in, sums)."""
    G = len(dec.groups)
    pairs = G * (G - 1) / 2.0
    K = np.asarray(benefit.p_d1).shape[1] if benefit is not None and lam is not None else 0
    check_pair_work(G, pairs * (B * PAIR_BASE_TERMS + (B + 1) * 4.0 * K * K),
                    f"{B} bootstrap replicates a pair" + (f", Lambda over {K} levels" if K else ""),
                    fix=", or fewer bootstrap replicates (n_boot, --boot)")


def _boot_q(q: Any, values: list[float | None], z: float, ratio: bool) -> Any:
    """(estimate, lower, upper, se) with se the bootstrap sd of ``values`` (the replicates
    where the quantity is defined); None where the estimate is; no interval
    (:func:`~causalfair.engines.groups.no_interval`) with fewer than two such replicates."""
    if q is None:
        return None
    e = float(q[0])
    v = np.asarray([x for x in values if x is not None], dtype=np.float64)
    if v.size < 2:
        return no_interval(q)
    se = float(v.std(ddof=1))
    lo, hi = e - z * se, e + z * se
    if ratio:
        lo, hi = max(0.0, lo), min(1.0, hi)
    return (e, lo, hi, se)


def _pair_lambda(name: str, dec: Any, benefit: Any, lam: Any, arrays: Any, alpha: float,
                 has_reps: bool) -> Any:
    """Lambda of pair ``name`` by the log audit's estimator, with its interval."""
    if benefit is None or lam is None:
        return None
    a, b = split_pair(name, dec.groups)
    ab = tuple(dec.pair) if {a, b} == set(dec.pair) else (a, b)  # the audit's orientation
    point = (benefit.p_d1, benefit.delta, benefit.state_weights)
    if not has_reps or arrays is None:
        return no_interval((float(lambda_pairs(*point, ab, benefit.eps).sum()), None, None,
                            None))
    c = lam.c_n if lam.c_n is not None else lambda_threshold_c(lam.n)
    res = threshold_lambda(*point, *arrays, pair=ab, eps=benefit.eps, c=c)
    cols = [(res["plugin"], res["plugin_replicates"])]
    if lam.estimator == "thresholded":
        cols = [(res["value"], res["replicates"])] + cols
    e, r = cols[0]
    lo, hi = lambda_interval_of(cols, alpha, "normal")
    return (float(e), lo, hi, float(np.std(r, ddof=1)))
