"""The arithmetic of pairs of per-group values (:mod:`causalfair.engines.groups`): a
quantity with its interval, the pairs' names in order, the impact ratio's interval and the
pooled values of intersectional groups (docs/decomposition.md, "More than two groups")."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["EFFECTS", "RATIOS", "Q", "interval", "pair_names", "ratio_interval", "quad",
           "intersections"]

#: Pair effects and the per-group value each is a difference of.
EFFECTS: dict[str, str] = {"C": "V", "DPE": "direct", "IPE": "indirect", "SPE": "V_0"}
#: Ratios (min / max of two groups' values) and the per-group value each compares.
RATIOS: dict[str, str] = {"ratio_V": "V", "ratio_selection": "selection"}
Q = tuple[float, "float | None", "float | None", "float | None"]  # estimate, lower, upper, se
#: lower = upper = None: no interval (an estimate from a log without bootstrap replicates;
#: an exact value has lower = upper = estimate, a point with no sampling error).


def interval(est: float, se: float | None, z: float) -> Q:
    """``est`` with its normal interval est +- z se (se None: an exact point)."""
    e = float(est)
    return (e, e, e, None) if se is None else (e, e - z * se, e + z * se, float(se))


def pair_names(groups: Sequence[str], ref: int) -> list[tuple[int, int]]:
    """The compared pairs as index pairs (a, b): every other group against the reference
    first (a - ref), then the pairs without the reference in declared order."""
    G = len(groups)
    out = [(g, ref) for g in range(G) if g != ref]
    out += [(a, b) for a, b in itertools.combinations(range(G), 2) if ref not in (a, b)]
    return out


def ratio_interval(qa: float, qb: float, sa: float | None, sb: float | None, z: float,
                   coupled: bool = False, cab: float | None = None) -> Q | None:
    """min / max of two positive quantities with standard errors ``sa``, ``sb`` (None: exact),
    its interval by the delta method on its log: the two errors' relative sizes added in
    quadrature, less 2 cab / (qa qb) with ``cab`` their covariance (groups that share
    worlds), or summed (``coupled`` without a covariance: the bound, as the pairs'
    differences)."""
    qa, qb = float(qa), float(qb)
    if not (qa > 0 and qb > 0):
        return None
    lo_, hi_ = (qa, qb) if qa <= qb else (qb, qa)
    r = lo_ / hi_
    if sa is None or sb is None:
        return (r, r, r, None)
    if cab is not None:
        s_log = math.sqrt(max(0.0, (sa / qa) ** 2 + (sb / qb) ** 2 - 2.0 * cab / (qa * qb)))
    else:
        s_log = (sa / qa + sb / qb) if coupled else math.sqrt((sa / qa) ** 2 + (sb / qb) ** 2)
    return (r, r * math.exp(-z * s_log), min(1.0, r * math.exp(z * s_log)), r * s_log)


def intersections(atts: list[tuple[str, tuple[str, ...]]], groups: tuple[str, ...],
                  vals: Mapping[str, np.ndarray], gse: Callable[[str, int], float | None],
                  weights: np.ndarray, z: float, coupled: bool,
                  cov: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Per attribute: each value's pooled per-group values (weights of the groups carrying
    it) and the pairs "<value>-<first value>" and the other values' pairs. ``cov``: the
    covariances of the groups' estimates when they share worlds
    (:func:`causalfair.engines.groups.compare`'s): a pooled value's variance is w' cov w and
    a pair's (w_a - w_b)' cov (w_a - w_b), paired as the pairs of groups; without it the
    se_a + se_b bound when ``coupled``, else the groups' variances added."""
    combos = list(itertools.product(*(v for _, v in atts)))  # group g carries combos[g]
    w = np.asarray(weights, dtype=np.float64)
    out: dict[str, Any] = {}
    for j, (name, values) in enumerate(atts):
        pooled: dict[str, dict[str, Q]] = {}
        raw: dict[str, dict[str, tuple[float, float | None]]] = {}
        full: dict[str, np.ndarray] = {}  # each value's weights over all the groups
        for v in values:
            members = [g for g in range(len(groups)) if combos[g][j] == v]
            wm = w[members] / w[members].sum()
            full[v] = np.zeros(len(groups))
            full[v][members] = wm
            raw[v] = {}
            for key, arr in vals.items():
                est = float(wm @ arr[members])
                ses = [gse(key, g) for g in members]
                s = (math.sqrt(quad(cov[key], full[v], full[v])) if cov is not None
                     else None if any(x is None for x in ses) else (
                         float(wm @ np.asarray(ses)) if coupled
                         else float(math.sqrt(float((wm ** 2) @ np.asarray(ses) ** 2)))))
                raw[v][key] = (est, s)
            pooled[v] = {k: interval(e, s, z) for k, (e, s) in raw[v].items()}
        prs: dict[str, dict[str, Q | None]] = {}
        for ia, ib in pair_names(values, 0):
            a, b = values[ia], values[ib]
            q: dict[str, Q | None] = {}
            for key, src in EFFECTS.items():
                (ea, sa), (eb, sb) = raw[a][src], raw[b][src]
                c = None if cov is None else full[a] - full[b]
                s = (math.sqrt(quad(cov[src], c, c)) if c is not None
                     else None if sa is None or sb is None else (
                         sa + sb if coupled else math.sqrt(sa * sa + sb * sb)))
                q[key] = interval(ea - eb, s, z)
            q["ratio_V"] = ratio_interval(raw[a]["V"][0], raw[b]["V"][0], raw[a]["V"][1],
                                  raw[b]["V"][1], z, coupled, None if cov is None else
                                  float(np.einsum("g,gh,h->", full[a], cov["V"], full[b])))
            prs[f"{a}-{b}"] = q
        out[name] = {"values": values, "per_value": pooled, "pairs": prs}
    return out


def quad(cov: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """x' cov y, at least 0 (a variance: x = y)."""
    return max(0.0, float(np.einsum("g,gh,h->", x, cov, y)))
