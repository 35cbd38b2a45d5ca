"""The time of the every-pair comparison, bounded before its pairs are computed
(docs/limits.md, "Work").

The memory of the comparison (:func:`causalfair.engines.groups.check_pairs`) bounds the
number of pairs, not what each pair costs: a pair's Lambda is exact over K x K levels
(:func:`causalfair.engines.benefit.lambda_pairs`, about 30 ns a term), or by forks over
the cells both groups visit, once for the estimate and once for each of the 200 bootstrap
replicates (:func:`causalfair.engines.benefit_mc.benefit_fairness_mc`); a log audit's
pairs are computed again for every bootstrap replicate. So the comparison's work is
counted here in *pair terms* (one (cell, cell, action) term of one pair's Lambda; a pair's
own quantities and each forks replicate's fixed cost counted as the terms they take as
long) and a request over :func:`max_pair_terms` is refused, exit 2, naming the groups,
the cells, the replicates and the fix, before the pairs' work starts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair._limits import env_count
from causalfair.errors import ResourceLimitError

__all__ = ["DEFAULT_MAX_PAIR_TERMS", "PAIR_TERMS_ENV", "PAIR_BASE_TERMS", "REPLICATE_TERMS",
           "max_pair_terms", "check_pair_work", "lambda_terms", "pair_sum"]

#: Most pair terms one every-pair comparison may ask for: 10^11, about an hour of one core
#: at the measured 30-35 ns a term (exact: 10.8 ms a pair at K = 400 levels; forks: 150 ms
#: a pair at 64 cells, 54 ms at 4 cells). ``CAUSALFAIR_MAX_PAIR_TERMS`` changes it.
DEFAULT_MAX_PAIR_TERMS = 10**11
#: Environment variable overriding :data:`DEFAULT_MAX_PAIR_TERMS`.
PAIR_TERMS_ENV = "CAUSALFAIR_MAX_PAIR_TERMS"
#: A pair's own quantities (its C, DPE, IPE, SPE, ratios and their intervals: about 80 us),
#: counted as terms.
PAIR_BASE_TERMS = 3_000
#: The fixed cost of one forks replicate of one pair (its arrays and sums: about 250 us),
#: counted as terms.
REPLICATE_TERMS = 8_000


def max_pair_terms() -> int:
    """The ceiling on pair terms (``CAUSALFAIR_MAX_PAIR_TERMS`` or the default)."""
    return env_count(PAIR_TERMS_ENV, DEFAULT_MAX_PAIR_TERMS, "pair terms", "1e12")


def pair_sum(sizes: Any) -> float:
    """sum over the pairs a < b of sizes[a] x sizes[b] (as a float: no overflow)."""
    s = np.asarray(sizes, dtype=np.float64)
    return float((s.sum() ** 2 - (s * s).sum()) / 2.0)


def lambda_terms(benefit: Any, n_boot: int) -> tuple[float, str]:
    """The terms of every pair's Lambda from ``benefit`` (a BenefitResult of the compared
    groups: exact, over every level; by forks, over the cells each group visits, ``n_boot``
    replicates), summed over the pairs, and the words that say so; (0, "") for none."""
    if benefit is None:
        return 0.0, ""
    p = np.asarray(benefit.p_d1)
    G, K = p.shape[0], p.shape[1]
    A = p.shape[2] if p.ndim == 3 else 1
    pairs = G * (G - 1) / 2.0
    if benefit.method == "exact":
        return pairs * K * K * A, f"Lambda exact over {K} levels"
    visited = (np.asarray(benefit.state_weights) > 0).sum(axis=1)
    runs = n_boot + 2 if n_boot >= 2 else 1  # the estimate (twice: its pre-test), replicates
    A_terms = (A if p.ndim == 3 else 2) + 2  # the gaps, the largest gap, TV, the plug-in
    spread = pairs * K * K if visited.min(initial=K) < K else 0.0  # into a K x K array
    return (runs * (A_terms * pair_sum(visited) + spread) + (n_boot + 1) * REPLICATE_TERMS * pairs,
            f"Lambda by forks over up to {int(visited.max(initial=0))} cells a group, "
            f"{n_boot} bootstrap replicates a pair")


def check_pair_work(n_groups: int, terms: float, what: str, where: str = "compare groups",
                    fix: str = "") -> None:
    """Refuse an every-pair comparison of ``n_groups`` groups whose work, ``terms`` pair
    terms beside each pair's own :data:`PAIR_BASE_TERMS` (``what``: the words saying what
    they are), is over :func:`max_pair_terms`: a :class:`ResourceLimitError` naming the
    groups, the pairs, the terms, the limit and the fix."""
    G = int(n_groups)
    pairs = G * (G - 1) // 2 if G > 2 else 0
    if not pairs:
        return
    total = float(terms) + pairs * float(PAIR_BASE_TERMS)
    limit = max_pair_terms()
    if total > limit:
        raise ResourceLimitError(
            f"{where}: {G} groups compared in every one of their {pairs} pairs"
            + (f" ({what})" if what else "") + f": about {total:.3g} pair terms, over the "
            f"limit of {limit:.3g} (10^11 by default: about an hour of one core); merge groups "
            f"(G groups make G(G-1)/2 pairs){fix}, or raise the limit with "
            f"{PAIR_TERMS_ENV} (docs/limits.md).")
