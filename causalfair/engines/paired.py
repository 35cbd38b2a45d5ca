"""What :func:`causalfair.engines.montecarlo.compare_mc` returns: the paired differences of
a policy and a baseline run with common random numbers, with their intervals.

A :class:`PairedComparison` is the dict ``compare_mc`` always returned (``{quantity:
{"policy", "baseline", "diff", "se", "abs_diff", "abs_se"}}`` for C, DPE, IPE, SPE and
utility), each entry now also with ``lower``/``upper`` (``diff`` +- z se) and
``abs_lower``/``abs_upper`` at level 1 - ``alpha``. With more than two groups and no pair
named, the pair is the largest and smallest V^pi of the policy in this same run: chosen
from the data, so the intervals of C, DPE, IPE and SPE are simultaneous over the m =
G(G-1)/2 pairs (Bonferroni, z_{1 - alpha/(2m)}; :mod:`causalfair._simultaneous`, as
:func:`~causalfair.engines.montecarlo.decompose_mc`'s); utility is not a pair's and keeps
z_{1 - alpha/2}. Numpy-free.
"""

from __future__ import annotations

from typing import Any

from causalfair._io import fixed
from causalfair._simultaneous import WIDENED, pair_z, simultaneous_dict, simultaneous_sentence

__all__ = ["PairedComparison"]


class PairedComparison(dict):
    """``{quantity: {...}}`` as :func:`~causalfair.engines.montecarlo.compare_mc` returns it
    (a dict: indexing, iteration and ``json.dumps`` read the quantities), with ``pair``
    (the two group names, the first minus the second), ``simultaneous`` (m: the pairs the
    pair was chosen from; 1 when named or two groups) and ``alpha``; :meth:`to_dict` and
    ``str()`` say how the intervals were made."""

    def __init__(self, numbers: dict[str, dict[str, float]], *, pair: tuple[str, str],
                 simultaneous: int = 1, alpha: float = 0.05) -> None:
        z1 = pair_z(alpha, 1)
        zm = pair_z(alpha, simultaneous)
        out = {}
        for key, d in numbers.items():
            z = zm if key in WIDENED else z1
            out[key] = {**d, "lower": d["diff"] - z * d["se"], "upper": d["diff"] + z * d["se"],
                        "abs_lower": d["abs_diff"] - z * d["abs_se"],
                        "abs_upper": d["abs_diff"] + z * d["abs_se"]}
        super().__init__(out)
        self.pair = (str(pair[0]), str(pair[1]))
        self.simultaneous = int(simultaneous)
        self.alpha = float(alpha)

    @property
    def pair_name(self) -> str:
        return f"{self.pair[0]}-{self.pair[1]}"

    def note(self) -> str:
        """The one sentence on a data-chosen pair's intervals
        (:func:`causalfair._simultaneous.simultaneous_sentence`); "" when m = 1."""
        if self.simultaneous == 1:
            return ""
        return simultaneous_sentence(self.pair_name, self.simultaneous, self.alpha)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``pair``, ``alpha``, ``quantities`` (the entries) and, for a pair
        chosen from the data, ``simultaneous``
        (:func:`causalfair._simultaneous.simultaneous_dict`, as a Decomposition's)."""
        out: dict[str, Any] = {"pair": list(self.pair), "alpha": self.alpha,
                               "quantities": {k: dict(v) for k, v in self.items()}}
        if self.simultaneous > 1:
            out["simultaneous"] = simultaneous_dict(self.simultaneous, self.alpha)
        return out

    def __str__(self) -> str:
        level = f"{100 * (1 - self.alpha):g}% CI"
        lines = [f"Paired comparison, policy minus baseline (pair {self.pair_name}; "
                 "utility: population-weighted)"]
        for key, d in self.items():
            lines.append(f"  {key:<7} = {fixed(d['diff'], sign=True)}   {level} "
                         f"[{fixed(d['lower'], sign=True)}, {fixed(d['upper'], sign=True)}]")
        if self.simultaneous > 1:
            lines.append(f"  {self.note()}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"PairedComparison({dict.__repr__(self)}, pair={self.pair!r}, " \
               f"simultaneous={self.simultaneous}, alpha={self.alpha!r})"
