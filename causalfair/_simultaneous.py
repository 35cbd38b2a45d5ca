"""Simultaneous intervals for a pair chosen from the data (docs/decomposition.md, "More
than two groups"): the one place that says when the compared pair's intervals are widened,
by how much, and how the outputs say it.

With more than two groups and no pair named, the decomposition compares the groups with
the largest and smallest V^pi (method.md section 1), picked from the same estimates as its
intervals: an interval at level 1 - alpha around the pair the data picked covers less than
its level (about 0.88 with 3 identical groups, 0.74 with 5). Bonferroni over the
m = G(G-1)/2 pairs restores it: each pair's interval at level 1 - alpha/m (the normal
quantile z_{1 - alpha/(2m)}; bootstrap percentiles alpha/(2m) and 1 - alpha/(2m)) covers
every pair's true value at once with probability >= 1 - alpha, so the chosen pair's whichever
it is. Point estimates are unchanged; a named pair, two groups and the exact engine (no
interval) are untouched. Numpy-free: the report's and the command line's text read it.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

__all__ = ["METHOD", "MARK", "WIDENED", "ci_label", "pairs_chosen_from", "pair_alpha",
           "pair_z", "simultaneous_dict", "simultaneous_sentence"]

#: The adjustment's name in the outputs (``"simultaneous": {"method": ...}``).
METHOD = "bonferroni"

#: The mark a label of widened intervals carries (:func:`ci_label`), explained where it
#: stands by :func:`simultaneous_sentence` after the same mark.
MARK = "*"

#: The compared pair's quantities whose intervals are widened (Lambda is not: the pair is
#: chosen by V^pi, and Lambda's interval is its own estimator's; docs/decomposition.md).
WIDENED: tuple[str, ...] = ("C", "DPE", "IPE", "SPE", "ratio_V")


def pairs_chosen_from(n_groups: int, named: bool) -> int:
    """m, the pairs the compared pair was chosen from: G(G-1)/2 when it is the default of
    more than two groups (picked from the estimates), else 1 (named in advance, or the
    default of two groups, the first minus the second: nothing was chosen)."""
    G = int(n_groups)
    return 1 if named or G <= 2 else G * (G - 1) // 2


def pair_alpha(alpha: float, m: int) -> float:
    """The level of each interval is 1 - alpha/m (Bonferroni over ``m`` pairs)."""
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"m: bad value {m!r}; the number of pairs is an integer >= 1.")
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha: bad value {alpha!r}; give a number in (0, 1), e.g. 0.05.")
    return float(alpha) / m


def pair_z(alpha: float, m: int = 1) -> float:
    """The two-sided normal quantile z_{1 - alpha/(2m)} (m = 1: z_{1 - alpha/2}, the
    marginal one). Where 1 - alpha/(2m) rounds to 1 (alpha/(2m) below about 1.1e-16: a tiny
    alpha, or a Bonferroni level over very many pairs) it is the lower tail's quantile,
    negated: -z_{alpha/(2m)}, the same number without the rounding."""
    p = max(pair_alpha(alpha, m) / 2.0, 5e-324)  # (an alpha/2m below the least float: it)
    if 1.0 - p < 1.0:  # (unchanged bits wherever it was defined)
        return NormalDist().inv_cdf(1.0 - p)
    return -NormalDist().inv_cdf(p)


def simultaneous_dict(m: int, alpha: float) -> dict[str, Any]:
    """What the JSON outputs say next to ``compared_by`` (and a Decomposition's
    ``to_dict``) when ``m`` > 1: the pairs, the method, the family's level 1 - ``alpha``,
    each interval's level 1 - alpha/m and its normal quantile."""
    return {"pairs": int(m), "method": METHOD, "family_level": 1.0 - float(alpha),
            "level": 1.0 - pair_alpha(alpha, m), "z": pair_z(alpha, m),
            "quantities": list(WIDENED)}


def simultaneous_sentence(pair: str, m: int, alpha: float) -> str:
    """The one sentence every text output (``causalfair decompose``, ``print(result)``, the
    report, card and annex) says about a data-chosen pair's intervals."""
    return (f"The intervals of {pair} are simultaneous over the {m} pairs of groups "
            f"(Bonferroni: each at level {100 * (1 - pair_alpha(alpha, m)):.4g}% instead of "
            f"{100 * (1 - alpha):g}%), because the pair was chosen from these same estimates: "
            f"they cover its true values with probability at least {100 * (1 - alpha):g}% "
            "whichever pair the data picked.")


def ci_label(level: float, m: int = 1) -> str:
    """The one label of intervals at ``level`` percent (95 for alpha = 0.05, written with
    ``:g``): "95% CI" for marginal ones (m = 1: a named pair, two groups), "95% CI*"
    when some of them are simultaneous over the ``m`` > 1 pairs a data-chosen pair was picked
    from; wherever it stands, the same mark then precedes :func:`simultaneous_sentence`
    (the report's verdict and metrics tables, its decomposition figure)."""
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"m: bad value {m!r}; the number of pairs is an integer >= 1.")
    return f"{level:g}% CI" + ("" if m == 1 else MARK)
