"""More than two groups: every group against a reference group, every pair, the worst pair
(docs/decomposition.md, "More than two groups"; method.md sections 2-4).

A layer over the two-group engines. One decomposition already holds every group's values
(V^pi_s, V^PS_s, V^pi0_s, per group, with their standard errors under Monte Carlo), so the
pair (a, b)'s effects are differences of per-group values:

    C(a-b)   = V^pi_a - V^pi_b          DPE(a-b) = direct_a - direct_b
    IPE(a-b) = indirect_a - indirect_b  SPE(a-b) = V^pi0_a - V^pi0_b

exactly what the pair engine gives when run on the pair (``pair=(a, b)``), with no new
simulation. Monte Carlo intervals: the groups of independent units are simulated
independently, so a pair's variance is the sum of the groups' (se^2_a + se^2_b); groups
of coupled units share worlds, so a pair's variance is paired: that of its per-world
difference, which the engine keeps for every pair (``Decomposition.paired_var``, made as
the compared pair's own se, so that pair's row has its interval bit for bit); a
decomposition of coupled units without ``paired_var`` (made by hand) gets the bound
se_a + se_b (valid whatever the correlation). Lambda of a pair: from the exact benefit table by the exact
formula (:func:`causalfair.engines.benefit.lambda_pairs`), or by a rerun of the forks for
that pair (its own bootstrap interval).

**Ratios** (the four-fifths-rule impact ratio): for a pair (a, b) and a per-group quantity
q >= 0, ``ratio_q = min(q_a, q_b) / max(q_a, q_b)`` in [0, 1] (1: equal); undefined
(None) when either value is <= 0. ``ratio_V`` uses the mean gain V^pi_s;
``ratio_selection`` the selection rate (share of the group given any non-baseline action,
averaged over the steps; :func:`causalfair.engines.selection.selection_rates`). Monte Carlo
interval of ``ratio_V``: the delta method on log(q_a / q_b), capped at 1.

Pairs are named ``"A-B"`` (quantity of A minus that of B): ``"<group>-<reference>"`` for
every group against the reference, and ``"<first>-<second>"`` in declared order for the
others. The **worst pair** is the pair with the largest |C| (with independent units and
more than two groups, the pair the decomposition reports by default).

**Intersections**: a system whose groups are the product of two or more attributes
(``System.group_attributes``, e.g. ``{"race": ("A", "B"), "sex": ("F", "M")}`` with groups
in product order) also gets per-attribute marginal comparisons: each value's pooled
values (group-weight average of the groups carrying it) compared with the first value.
Lambda is not pooled (it pairs individuals within two groups).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from causalfair._io import fixed
from causalfair._limits import check_memory
from causalfair._simultaneous import WIDENED, pair_z, simultaneous_dict, simultaneous_sentence
from causalfair._validation import check_alpha, check_keywords, check_unit, z_quantile
from causalfair.engines._mc_base import paired_bytes, paired_cov
from causalfair.engines.benefit import lambda_pairs
from causalfair.engines.benefit_mc import N_BOOT, benefit_fairness_mc
from causalfair.engines.group_values import (
    EFFECTS,
    RATIOS,
    Q,
    intersections,
    pair_names,
)
from causalfair.engines.group_values import interval as _q
from causalfair.engines.group_values import ratio_interval as _ratio
from causalfair.engines.pair_work import check_pair_work, lambda_terms
from causalfair.errors import InputError, short
from causalfair.plotting import check_axes, new_figure, text_only, wrap
from causalfair.results import BenefitResult, Decomposition
from causalfair.thresholds import is_group_key

__all__ = ["GroupComparison", "compare", "pair_names", "EFFECTS", "RATIOS", "split_pair",
           "no_interval", "has_interval",
           "lambda_by_forks", "wanted", "benefit_for_pair", "resolve_pair", "pair_arg",
           "check_pairs", "PAIR_BYTES"]

_SIGNED = tuple(EFFECTS)

def _flip(q: Q) -> Q:
    return (-q[0], None if q[2] is None else -q[2], None if q[1] is None else -q[1], q[3])


def no_interval(q: Q | None) -> Q | None:
    """``q`` without its interval, (estimate, None, None, None): a sampled estimate whose
    replicates are missing (a log audit with n_boot < 2) claims no interval, not the
    zero-width one of an exact value."""
    return None if q is None else (float(q[0]), None, None, None)


def has_interval(q: Q | None) -> bool:
    """Whether ``q`` carries an interval (an exact point's lower = upper = estimate counts;
    :func:`no_interval`'s does not)."""
    return q is not None and q[1] is not None and q[2] is not None


#: Memory of one pair of groups in the every-pair comparison (its quantities, intervals,
#: the table's text and its JSON; measured on tabular models of 1,000 and 2,000 groups:
#: 1.2 KiB a pair for the comparison and its text, 2.2 KiB at ``decompose --json``'s peak).
PAIR_BYTES = 4096


def check_pairs(n_groups: int, where: str = "compare groups", coupled: bool = False) -> None:
    """Refuse, before any work, an every-pair comparison of ``n_groups`` groups whose
    G (G - 1) / 2 pairs (:data:`PAIR_BYTES` each; ``coupled``, groups that share worlds:
    with the G x G paired variances of each value, every pair's paired se,
    :func:`~causalfair.engines._mc_base.paired_bytes`) exceed the memory limit, naming
    the groups, the pairs and the fix. Every door calls it before its engines run
    (:func:`causalfair.compare_groups`, ``causalfair decompose``, an audit spec) and
    :func:`compare` again, which they all reach."""
    G = int(n_groups)
    pairs = G * (G - 1) // 2 if G > 2 else 0
    paired = paired_bytes(G) if coupled and pairs else 0.0
    check_memory(float(pairs) * PAIR_BYTES + paired, f"{where}: {G} groups compared in every "
                 f"one of their {pairs} pairs" + (" (groups that share worlds: G x G paired "
                 "variances)" if paired else ""), "merge groups (G groups make G(G-1)/2 pairs)")


def resolve_pair(pair: Any, groups: Sequence[str], where: str = "pair"
                 ) -> tuple[int, int] | None:
    """The compared groups ``pair`` as group indices (a, b): two group names (or indices),
    or ``"A-B"`` as thresholds name a pair; None stays None (the engines' default). A name
    that is not a group, or the same group twice, is refused naming ``where`` and the
    groups (the one check of an audit spec's ``[engine] pair`` and ``audit_logs(pair=)``)."""
    if pair is None:
        return None
    groups = tuple(str(g) for g in groups)
    fix = (f"name two of the groups {', '.join(groups)}, the first minus the second, e.g. "
           f"\"{groups[-1]}-{groups[0]}\" or [\"{groups[-1]}\", \"{groups[0]}\"]")
    if isinstance(pair, str):
        try:
            ab = split_pair(pair, groups)
        except InputError as exc:  # two readings: named with the field that gave the pair
            raise InputError(f"{where}: {exc}") from None
        bare = pair.strip("\"'")
        if ab is None and bare != pair and split_pair(bare, groups) is not None:
            raise InputError(f"{where}: {pair[:60]!r} names no two groups; drop the quotes "
                             f"inside the brackets ([{bare}]).")
        if ab is None:
            raise InputError(f"{where}: {pair[:60]!r} names no two groups; {fix}.")
        return ab
    try:
        a, b = pair
    except (TypeError, ValueError):
        raise InputError(f"{where}: expected two groups, got {short(pair, 60)}; {fix}.") from None
    out = []
    for g in (a, b):
        if _is_index(g) and 0 <= g < len(groups):
            out.append(int(g))
        elif (isinstance(g, str) or _is_bool(g)) and str(g) in groups:  # True: "True"
            out.append(groups.index(str(g)))
        elif not isinstance(g, str) and str(g) in groups:  # 7 for the group named "7"
            raise InputError(_label_not_index(where, g, len(groups)))
        else:
            raise InputError(f"{where}: {short(g, 60)} is not one of the groups; {fix}.")
    if out[0] == out[1]:
        raise InputError(f"{where}: the same group {groups[out[0]]!r} twice; {fix}.")
    return out[0], out[1]


def _is_bool(g: Any) -> bool:
    return isinstance(g, (bool, np.bool_))


def _is_index(g: Any) -> bool:
    return isinstance(g, (int, np.integer)) and not _is_bool(g)


def _label_not_index(where: str, g: Any, G: int) -> str:
    """The refusal of a number ``g`` that is a group's label but not its index (a log's
    groups 0, 7, 42; -1): integers name groups by index 0..G-1, the order of the groups
    (a bool, never an index, names the group "True" or "False")."""
    return (f"{where}: {g!r} is not a group index (0 to {G - 1}); for the group named "
            f"{str(g)!r} write its name as a string, \"{g}\" (integers are group indices "
            f"0 to {G - 1}, in the order of the groups).")


def pair_arg(pair: Any, groups: Sequence[str]) -> Any:
    """A Python door's ``pair=`` as the engines take it
    (:func:`~causalfair.results.check_pair`): two group names, ``"A-B"`` or a mix of names
    and indices as indices (:func:`resolve_pair`, naming ``groups`` when it names no two);
    a numpy array or pandas Series of two values as a tuple (by position); anything else
    as it is (None: the engine's default pair)."""
    if pair is None:
        return None
    values = getattr(pair, "tolist", None)  # a Series or array: its values, by position
    if callable(values) and not isinstance(pair, str) and np.ndim(pair) == 1:
        pair = tuple(values())
    if isinstance(pair, str) or (isinstance(pair, (tuple, list)) and len(pair) == 2 and any(
            isinstance(g, str) or (not (_is_index(g) and 0 <= g < len(groups))
                                   and str(g) in groups) for g in pair)):
        return resolve_pair(pair, groups)  # names; or a label that is no index: its refusal
    return pair


def split_pair(name: str, groups: Sequence[str]) -> tuple[int, int] | None:
    """``"A-B"`` as group indices (a, b), or None when it names no two distinct groups
    (a group name may itself contain ``-``: every split point is tried). A name that reads
    as two pairs (groups "a-b", "c", "a", "b-c": "a-b-c"), which group names checked by
    :func:`causalfair._validation.check_pair_names` never allow, is an InputError listing
    the readings: name the pair by its two groups instead (``pair=["a-b", "c"]``)."""
    text = str(name)
    groups = [str(g) for g in groups]
    reads = [(text[:i], text[i + 1:]) for i, ch in enumerate(text)
             if ch == "-" and text[:i] in groups and text[i + 1:] in groups
             and text[:i] != text[i + 1:]]
    if len(reads) > 1:
        raise InputError(f"pair {short(text, 60)} reads as {len(reads)} pairs: "
                         + ", ".join(f"{a!r} minus {b!r}" for a, b in reads)
                         + "; name the pair by its two groups (e.g. pair=[" + ", ".join(
                             f'"{g}"' for g in reads[0]) + "]), or rename a group so that "
                         "no two pairs read alike (e.g. without \"-\").")
    return (groups.index(reads[0][0]), groups.index(reads[0][1])) if reads else None


#: Every quantity of a pair, in the order errors list them.
PAIR_QUANTITIES: tuple[str, ...] = (*EFFECTS, "Lambda", *RATIOS)


def _check_key(key: Any) -> None:
    """A quantity of a pair, or an InputError naming the allowed ones (a mistyped key would
    otherwise read as "not available")."""
    if key not in PAIR_QUANTITIES:
        raise InputError(f"key: bad value {short(key, 40)}; allowed values: "
                         f"{', '.join(PAIR_QUANTITIES)}.")


@dataclass(frozen=True, eq=False)
class GroupComparison:
    """Every group and every pair of a decomposition with more than two groups (or any
    number, on request). ``per_group``: group -> value -> (estimate, lower, upper, se);
    ``pairs``: pair name (``"A-B"``) -> quantity (C, DPE, IPE, SPE, Lambda, ratio_V,
    ratio_selection) -> the same tuple or None (not available); ``reference`` the
    reference group; ``worst`` the pair with the largest |C|; ``attributes``: attribute ->
    {"values", "per_value", "pairs"} for intersectional groups, else None; ``coupled``: the
    groups share worlds (a pair's Monte Carlo se is paired, per world, :func:`compare`).
    ``chosen``: the row of
    the decomposition's pair when the data chose it (its ``simultaneous`` m > 1), whose
    intervals (C, DPE, IPE, SPE, ratio_V) are simultaneous over the ``simultaneous`` pairs
    (:mod:`causalfair._simultaneous`); else None. :meth:`table_lines` and
    :meth:`pairs_dict`: the table and the ``pairs`` section ``causalfair decompose`` prints
    (text, ``--json``) from a system and from ``--logs``."""

    groups: tuple[str, ...]
    reference: str
    engine: str
    level: float
    per_group: dict[str, dict[str, Q]]
    pairs: dict[str, dict[str, Q | None]]
    worst: str
    attributes: dict[str, Any] | None = None
    gain_unit: str | None = None  # the decomposition's (the system's gain unit), for plot
    coupled: bool = False  # groups share worlds: a pair's se is paired (compare's)
    paired: bool = True  # coupled: per-world paired se's (False: the bound se_a + se_b)
    simultaneous: int = 1  # m > 1: the row `chosen` (picked from the data) is Bonferroni over m
    chosen: str | None = None  # the compared pair's row when the data chose it, else None

    @property
    def intervals(self) -> bool:
        """Whether the pairs' C carry intervals (False: a log audit without bootstrap
        replicates, whose quantities are estimates only, lower = upper = None)."""
        return any(has_interval(q["C"]) for q in self.pairs.values())

    @property
    def reference_pairs(self) -> list[str]:
        """The pairs "<group>-<reference>"."""
        return [f"{g}-{self.reference}" for g in self.groups if g != self.reference]

    def quantity(self, pair: Any, key: str, where: str = "pair") -> Q | None:
        """Quantity ``key`` of ``pair`` (``"B-A"``, two names or indices, as every ``pair=``
        takes them; either order: ``"B-A"`` is ``"A-B"`` with the sign of C, DPE, IPE, SPE
        flipped; Lambda and ratios are symmetric). A pair that names no two groups is
        refused by :func:`resolve_pair`, naming ``where`` and the groups."""
        _check_key(key)
        ab = resolve_pair(pair, self.groups, where)
        a, b = (self.groups[i] for i in ab)
        if f"{a}-{b}" in self.pairs:
            return self.pairs[f"{a}-{b}"].get(key)
        q = self.pairs[f"{b}-{a}"].get(key)
        return _flip(q) if q is not None and key in _SIGNED else q

    def over_pairs(self, key: str) -> list[Q]:
        """Quantity ``key`` of every pair where it is available."""
        return list(self.by_pair(key).values())

    def by_pair(self, key: str) -> dict[str, Q]:
        """Pair name -> quantity ``key``, for every pair where it is available (what the
        thresholds over every pair judge, :func:`causalfair.thresholds.group_verdicts`,
        naming the pair that decides each verdict)."""
        _check_key(key)
        return {p: q[key] for p, q in self.pairs.items() if q.get(key) is not None}

    def to_dict(self) -> dict[str, Any]:
        """The ``groups`` and ``pairs`` sections of audit.json."""
        def d(q: Q | None) -> dict[str, Any] | None:
            return None if q is None else {"estimate": q[0], "ci_lower": q[1], "ci_upper": q[2],
                                           "se": q[3]}
        out: dict[str, Any] = {
            "groups": {"reference": self.reference, "engine": self.engine,
                       "ci_level": self.level,
                       "values": {g: {k: d(v) for k, v in vals.items()}
                                  for g, vals in self.per_group.items()}},
            "pairs": {"worst": self.worst, "reference_pairs": self.reference_pairs,
                      "values": {p: {k: d(v) for k, v in vals.items()}
                                 for p, vals in self.pairs.items()}},
        }
        if self.chosen is not None:  # that row's intervals: over the pairs it was chosen from
            out["pairs"]["simultaneous"] = dict(
                simultaneous_dict(self.simultaneous, 1.0 - self.level), pair=self.chosen)
        if self.attributes:
            out["groups"]["attributes"] = {
                att: {"values": list(a["values"]),
                      "per_value": {v: {k: d(x) for k, x in vals.items()}
                                    for v, vals in a["per_value"].items()},
                      "pairs": {p: {k: d(x) for k, x in vals.items()}
                                for p, vals in a["pairs"].items()}}
                for att, a in self.attributes.items()}
        return out

    def rows(self) -> list[list[Any]]:
        """One row per pair: pair, C, its interval, DPE, IPE, SPE, Lambda, ratio_V,
        ratio_selection, and "worst" on the worst pair (the report's per-pair table)."""
        def e(q: Q | None) -> Any:
            return None if q is None else q[0]
        out = []
        for p, q in self.pairs.items():
            c = q["C"]
            out.append([p, c[0], c[1], c[2], e(q["DPE"]), e(q["IPE"]), e(q["SPE"]),
                        e(q.get("Lambda")), e(q.get("ratio_V")), e(q.get("ratio_selection")),
                        "worst" if p == self.worst else ""])
        return out

    HEADER = ["pair", "C", "C lower", "C upper", "DPE", "IPE", "SPE", "Lambda", "ratio_V",
              "ratio_selection", ""]

    def compared_by(self, compared: tuple[int, int], named: bool) -> str:
        """How the pair a decomposition compares was chosen: ``"named"`` (``pair=``,
        ``--pair``, ``[engine] pair``), ``"largest_abs_C"`` (the default with more than two
        groups: the largest and smallest V^pi, picked from the same estimates) or
        ``"first_minus_second"`` (the default with two groups)."""
        if named:
            return "named"
        return "first_minus_second" if len(self.groups) == 2 else "largest_abs_C"

    @check_keywords(name="GroupComparison.table_lines")
    def table_lines(self, compared: tuple[int, int] | None = None, *,
                    named: bool = False) -> list[str]:
        """Every pair's C with its interval, DPE, IPE, SPE, Lambda and ratio_V, one line per
        pair, the worst pair marked; with ``compared`` (the group indices (a, b) of the
        decomposition printed with it) that pair marked too and a closing line saying how
        it was chosen (``named``: given by the user; else the default, which with more
        than two groups is picked from the same estimates, so that its sampled intervals
        are simultaneous over the pairs: :mod:`causalfair._simultaneous`). The one table
        that ``causalfair decompose`` prints under the compared pair's decomposition, from
        a system and from ``--logs`` (:meth:`LogAudit.summary
        <causalfair.logs.result.LogAudit.summary>`)."""
        how = {"exact": "exact values, no sampling error",
               "none": "no intervals: no bootstrap replicates (n_boot < 2), estimates only",
               "mc": (f"{100 * self.level:g}% normal intervals, estimate +- z * "
                      + (("se of the per-world difference X - Y (groups that share worlds; "
                          "the compared pair's as above)" if self.paired else
                          "(se_X + se_Y), conservative for groups that share worlds: at "
                          "least as wide as the compared pair's own interval above")
                         if self.coupled else "sqrt(se_X^2 + se_Y^2)")),
               "logs": (f"{100 * self.level:g}% normal intervals, estimate +- z * bootstrap "
                        "sd of the pair over the replicates")}.get(
            self.engine if self.intervals else "none", f"{100 * self.level:g}% intervals")
        rows = self.rows()
        here = None
        if compared is not None:
            a, b = (self.groups[i] for i in compared)
            here = f"{a}-{b}" if f"{a}-{b}" in self.pairs else f"{b}-{a}"
        w = max(14, *(len(str(row[0])) for row in rows))  # long group names
        lines = [f"Every pair (X-Y: X minus Y; reference group {self.reference}; worst pair "
                 f"{self.worst}, the largest |C|; {how}):",
                 f"  {'pair':<{w}} {'C':>10} {'C lower':>10} {'C upper':>10} {'DPE':>10} "
                 f"{'IPE':>10} {'SPE':>10} {'Lambda':>9} {'ratio_V':>8}"]
        for row in rows:
            p, c, lo, hi, dpe, ipe, spe, lam, rv = row[:9]
            marks = (["worst"] if row[-1] else []) + (
                [f"compared above{'' if p == f'{a}-{b}' else f' (as {a}-{b})'}"]
                if p == here else [])
            lines.append(f"  {p:<{w}} " + " ".join(
                f"{'n/a':>10}" if v is None else fixed(v, sign=True, width=10) for v in (
                    c, lo, hi, dpe, ipe, spe)) + f" {_cell(lam, 9, 6)} {_cell(rv, 8, 4)}"
                + (f"  {', '.join(marks)}" if marks else ""))
        if compared is None:
            return lines
        by = self.compared_by(compared, named)
        if by == "named":
            lines.append(f"The decomposition above compares {a}-{b}, the pair named (--pair; "
                         "pair= in Python).")
        elif by == "first_minus_second":
            lines.append(f"The decomposition above compares {a}-{b}, the default with two "
                         "groups (the first minus the second); --pair B-A (pair= in Python) "
                         "names another.")
        elif self.chosen is None:  # exact: no interval to widen
            lines.append(f"The decomposition above compares {a}-{b}, the default: the pair "
                         "with the largest |C| (the largest and smallest V^pi); --pair A-B "
                         "(pair= in Python) compares another.")
        else:
            lines.append(f"The decomposition above compares {a}-{b}, the default: the pair "
                         "with the largest |C| (the largest and smallest V^pi). "
                         + simultaneous_sentence(f"{a}-{b}", self.simultaneous, 1 - self.level)
                         + " A pair named in advance (--pair A-B; pair= in Python) keeps "
                         f"{100 * self.level:g}% intervals.")
        return lines

    @check_keywords(name="GroupComparison.pairs_dict")
    def pairs_dict(self, compared: tuple[int, int] | None = None, *,
                   named: bool = False) -> dict[str, Any]:
        """The ``pairs`` section of ``causalfair decompose --json`` (from a system and from
        ``--logs``): audit.json's (:meth:`to_dict`) with the ``reference``, the intervals'
        ``ci_level`` and ``engine``, and with ``compared`` the pair the decomposition
        compares (``"A-B"``) and ``compared_by`` (:meth:`compared_by`)."""
        out = dict(self.to_dict()["pairs"], reference=self.reference, ci_level=self.level,
                   engine=self.engine)
        if compared is not None:
            out["compared"] = "-".join(self.groups[i] for i in compared)
            out["compared_by"] = self.compared_by(compared, named)
        return out

    def _frame(self, values: dict[str, dict[str, Q | None]], name: str) -> Any:
        import pandas as pd

        def se(q: Q) -> float:  # none given: 0 for a point, unknown for an interval
            if q[3] is not None:
                return q[3]
            return 0.0 if q[1] == q[2] == q[0] else float("nan")

        def bound(v: float | None) -> float:  # no interval: NaN
            return float("nan") if v is None else v

        recs = [(key, k, q[0], se(q), bound(q[1]), bound(q[2]))
                for key, vals in values.items() for k, q in vals.items() if q is not None]
        return pd.DataFrame(recs, columns=[name, "quantity", "estimate", "se", "ci_lower",
                                           "ci_upper"]).set_index([name, "quantity"])

    @check_keywords(name="GroupComparison.to_frame")
    def to_frame(self, alpha: float | None = None) -> Any:
        """One row per (pair, quantity) of :attr:`pairs`: estimate, se, ci_lower, ci_upper
        at level :attr:`level` (as :meth:`~causalfair.results.Decomposition.to_frame`: a point
        has se 0; an interval without a standard error, NaN; an estimate without an interval,
        NaN se and bounds); quantities not available are left out.
        ``df.loc["B-A"]`` is one pair, ``df.xs("C", level="quantity")`` one quantity.
        ``alpha`` (as the other results' ``to_frame(alpha)``): any for an exact comparison
        (points), else this comparison's, 1 - :attr:`level`; another is refused, naming the
        fix."""
        self._check_alpha(alpha)
        return self._frame(self.pairs, "pair")

    def _check_alpha(self, alpha: float | None) -> None:
        if alpha is None:
            return
        if abs(1.0 - check_alpha(alpha) - self.level) > 1e-9 and self.engine != "exact":
            raise InputError(f"alpha: {alpha!r} asks for {100 * (1 - alpha):g}% intervals; this "
                             f"comparison's are at {100 * self.level:g}%: compare again with "
                             f"cf.compare_groups(..., alpha={alpha!r}).")

    def groups_frame(self) -> Any:
        """One row per (group, value) of :attr:`per_group` (V, V_ps, V_0, direct,
        indirect, utility): estimate, se, ci_lower, ci_upper, as :meth:`to_frame`."""
        return self._frame(self.per_group, "group")

    @check_keywords(name="GroupComparison.plot")
    def plot(self, quantity: str = "C", unit: str | None = None, *, ax: Any = None) -> Any:
        """Every pair's ``quantity`` (C, DPE, IPE, SPE, Lambda, ratio_V or ratio_selection)
        with its interval at :attr:`level`, one row per pair where it is available, the
        worst pair marked: a matplotlib Figure on the Agg canvas (``fig.savefig(...)``;
        Jupyter shows it; nothing is shown or written here), or, with ``ax`` (a matplotlib
        Axes), drawn there and that Axes' Figure returned. ``unit``: the gain's unit on
        the axis of C and its parts; default :attr:`gain_unit`, else "gain units"."""
        if quantity not in PAIR_QUANTITIES:
            raise InputError(f"quantity: bad value {short(quantity, 40)}; allowed values: "
                             f"{', '.join(PAIR_QUANTITIES)}.")
        values = self.by_pair(quantity)
        if not values:
            raise InputError(f"quantity: {quantity} is not available for any pair of this "
                             f"comparison; plot one of {', '.join(EFFECTS)}.")
        unit = check_unit(unit)  # (as every other plot's)
        check_axes(ax)
        with text_only():  # group names as written, never mathtext
            return self._plot(quantity, values, unit, ax)

    def _plot(self, quantity: str, values: dict[str, Q], unit: str | None, ax: Any) -> Any:
        names = list(values)[::-1]  # the first pair at the top
        est = np.array([values[p][0] for p in names])
        lo = np.array([values[p][0 if values[p][1] is None else 1] for p in names])
        hi = np.array([values[p][0 if values[p][2] is None else 2] for p in names])
        y = np.arange(len(names), dtype=float)
        if ax is None:
            fig = new_figure(7.0, 1.2 + 0.35 * len(names))
            ax = fig.subplots()
        else:
            fig = ax.figure
        ax.errorbar(est, y, xerr=[est - lo, hi - est], fmt="o", color="#4c72b0", capsize=4,
                    lw=1)
        ax.axvline(1.0 if quantity in RATIOS else 0.0, color="black", lw=0.6, ls="--")
        ax.set_yticks(y, names, fontsize=8)
        if self.worst in names:  # in red: its point and its name
            i = names.index(self.worst)
            ax.plot([est[i]], [y[i]], "o", color="#c44e52", ms=9, zorder=3)
            ax.get_yticklabels()[i].set(color="#c44e52", fontweight="bold")
        what = {"Lambda": "Lambda (benefit fairness; 0: equal benefits treated alike)",
                "ratio_V": "ratio_V (min / max of the groups' V; 1: equal)",
                "ratio_selection": "ratio_selection (min / max of the selection rates; 1: "
                                   "equal)"}
        unit = unit or self.gain_unit or "gain units"
        ax.set_xlabel(wrap(what.get(quantity, f"{quantity}, first group minus second "
                                              f"({unit})"), 80), fontsize=8)
        how = ("no intervals (no bootstrap replicates)"
               if not any(has_interval(q) for q in values.values())
               else "no sampling error" if all(values[p][1] == values[p][2] for p in names)
               else f"{100 * self.level:g}% intervals")
        if self.chosen in names and quantity != "Lambda" and how.endswith("intervals"):
            how += f"; {self.chosen}'s simultaneous over the {self.simultaneous} pairs"
        ax.set_title(wrap(f"{quantity} for every pair of groups ({self.engine}: {how}); "
                          f"worst pair (largest |C|, in red): {self.worst}", 90), fontsize=9)
        return fig

    def __repr__(self) -> str:
        c = self.pairs[self.worst]["C"]
        return (f"GroupComparison(engine={self.engine!r}, groups={self.groups!r}, "
                f"reference={self.reference!r}, worst={self.worst!r}, "
                f"C[{self.worst}]={c[0]:.6g})")

    def __str__(self) -> str:
        at = (f"intervals at {100 * self.level:g}%" if self.intervals
              else "no intervals: no bootstrap replicates")
        return (f"Groups compared ({self.engine}; reference {self.reference}; {at}):\n"
                + self._table().to_string(index=False, na_rep="n/a", float_format=fixed)
                + ("" if self.chosen is None else "\n" + self.simultaneous_note()))

    def simultaneous_note(self) -> str:
        """The sentence on the chosen pair's intervals
        (:func:`causalfair._simultaneous.simultaneous_sentence`); "" without one."""
        if self.chosen is None:
            return ""
        return simultaneous_sentence(self.chosen, self.simultaneous, 1.0 - self.level)

    def _table(self) -> Any:
        """:meth:`rows` as a DataFrame, a quantity not available as NaN (shown n/a)."""
        import pandas as pd

        rows = [[np.nan if v is None else v for v in row] for row in self.rows()]
        return pd.DataFrame(rows, columns=self.HEADER)

    def _repr_html_(self) -> str:
        import html

        table = self._table().to_html(index=False, na_rep="n/a", float_format=fixed)
        title = html.escape(f"Groups compared ({self.engine}), reference {self.reference}, "
                            f"worst pair {self.worst}")
        return f"<div><strong>{title}</strong>{table}</div>"


def _reference_index(groups: tuple[str, ...], reference: Any) -> int:
    if reference is None:
        return 0
    if _is_index(reference):
        if 0 <= int(reference) < len(groups):
            return int(reference)
        if str(reference) in groups:  # 7 for the group named "7": the pair's refusal
            raise InputError(_label_not_index("reference", reference, len(groups)))
    elif str(reference) in groups:
        return groups.index(str(reference))
    raise InputError(f"reference: bad value {short(reference, 60)}; name one of the groups "
                     f"{', '.join(groups)} (default: the first).")


def _selection_share(selection: Mapping[str, Any] | None, groups: Sequence[str]
                     ) -> tuple[np.ndarray, list[float | None]] | None:
    """Per group, the share given any non-baseline action, averaged over the steps, and
    its standard error (``se_selected``, from counts of sampled units; None where the rates
    are exact, a model's)."""
    if not selection:
        return None
    rates = selection.get("rate_overall") or {}
    try:
        vals = [sum(float(x) for x in rates[g].values()) for g in groups]
    except (KeyError, TypeError, ValueError):
        return None
    se = selection.get("se_selected") or {}
    return np.asarray(vals), [None if se.get(g) is None else float(se[g]) for g in groups]


def compare(dec: Decomposition, *, reference: Any = None, alpha: float = 0.05,
            benefit: BenefitResult | None = None,
            lambda_of: Callable[[tuple[int, int]], BenefitResult | None] | None = None,
            selection: Mapping[str, Any] | None = None,
            attributes: Mapping[str, Sequence[str]] | None = None,
            coupled: bool = False) -> GroupComparison:
    """Every group against ``reference`` (a group name or index; default the first) and
    every pair, from one decomposition ``dec`` (exact or Monte Carlo) with intervals at level
    1 - ``alpha``. Lambda per pair: from ``benefit`` when it is exact (the exact formula
    for any pair), else ``lambda_of(pair)`` (a BenefitResult for that pair, e.g. forks;
    ``benefit`` is reused for its own pair); None when neither is given. ``selection``:
    :func:`causalfair.engines.selection.selection_rates` output, for ``ratio_selection``.
    ``attributes``: the system's ``group_attributes`` (intersections; validated by
    :class:`~causalfair.systems.System`). ``coupled``: the groups share worlds: a pair's
    se is that of its per-world difference, ``dec.paired_var`` (the engine's, made as the
    compared pair's own se: that pair's row has the decomposition's interval); ratio_V and
    pooled values read the covariance made from it
    (:func:`~causalfair.engines._mc_base.paired_cov`); without ``dec.paired_var`` the bound
    se_a + se_b. Independent groups: sqrt(se_a^2 + se_b^2)."""
    groups = tuple(dec.groups)
    check_pairs(len(groups), coupled=coupled)
    ref = _reference_index(groups, reference)
    lambda_of = _within_work(groups, ref, benefit, lambda_of)
    z = z_quantile(alpha)
    m = int(getattr(dec, "simultaneous", 1))  # the decomposition's pair chosen from m pairs
    chosen = None if m == 1 or dec.se is None else _row_of(dec.pair, groups, ref)
    se = dict(dec.se) if dec.se else None
    vals = {"V": dec.V, "V_ps": dec.V_ps, "V_0": dec.V_0, "direct": dec.V - dec.V_ps,
            "indirect": dec.V_ps - dec.V_0, "utility": dec.utility_by_group}
    sel = _selection_share(selection, groups)

    def gse(key: str, i: int) -> float | None:
        return None if se is None else se.get(f"{key}[{groups[i]}]")

    per_group = {g: {k: _q(v[i], gse(k, i), z) for k, v in vals.items()}
                 for i, g in enumerate(groups)}
    if sel is not None:  # a share: its interval within [0, 1]
        for i, g in enumerate(groups):
            v, lo, hi, s = _q(sel[0][i], sel[1][i], z)
            per_group[g]["selection"] = (v, max(0.0, lo), min(1.0, hi), s)

    pv = _paired_var(dec, coupled)
    cov_v = None if pv is None else paired_cov(pv["V"])  # of the groups' V (ratio_V)

    def pair_se(src: str, a: int, b: int) -> float | None:
        if pv is not None:  # paired: the per-world difference's (the compared pair's se)
            return math.sqrt(float(pv[src][a, b]))
        sa, sb = gse(src, a), gse(src, b)
        if sa is None or sb is None:
            return None
        return sa + sb if coupled else math.sqrt(sa * sa + sb * sb)

    pairs: dict[str, dict[str, Q | None]] = {}
    for a, b in pair_names(groups, ref):
        q: dict[str, Q | None] = {}
        wide = pair_z(alpha, m) if f"{groups[a]}-{groups[b]}" == chosen else z
        # the data-chosen pair widens WIDENED only, as its outputs say
        zs = {k: wide if k in WIDENED else z for k in PAIR_QUANTITIES}
        for key, src in EFFECTS.items():
            v = vals[src]
            q[key] = _q(v[a] - v[b], pair_se(src, a, b), zs[key])
        q["Lambda"] = _lambda(dec, benefit, lambda_of, (a, b), zs["Lambda"])
        cab = None if cov_v is None else float(cov_v[a, b])
        q["ratio_V"] = _ratio(dec.V[a], dec.V[b], gse("V", a), gse("V", b), zs["ratio_V"],
                              coupled, cab)
        q["ratio_selection"] = None if sel is None else _ratio(
            sel[0][a], sel[0][b], sel[1][a], sel[1][b], zs["ratio_selection"], coupled)
        pairs[f"{groups[a]}-{groups[b]}"] = q
    worst = max(pairs, key=lambda p: abs(pairs[p]["C"][0]))
    atts = None if not attributes else intersections(
        [(str(k), tuple(str(x) for x in v)) for k, v in attributes.items()], groups, vals, gse,
        dec.group_weights, z, coupled,
        None if pv is None else {k: paired_cov(v) for k, v in pv.items()})
    return GroupComparison(groups=groups, reference=groups[ref], engine=dec.engine,
                           level=1.0 - alpha, per_group=per_group, pairs=pairs, worst=worst,
                           attributes=atts, gain_unit=getattr(dec, "gain_unit", None),
                           coupled=bool(coupled), paired=pv is not None or not coupled,
                           simultaneous=1 if chosen is None else m, chosen=chosen)


def _within_work(groups: tuple[str, ...], ref: int, benefit: BenefitResult | None,
                 lambda_of: Callable[[tuple[int, int]], BenefitResult | None] | None
                 ) -> Callable[[tuple[int, int]], BenefitResult | None] | None:
    """Refuse a comparison whose pairs' work is over the limit before the pairs are
    computed (:func:`~causalfair.engines.pair_work.check_pair_work`: each pair's Lambda,
    exact from ``benefit`` or by forks, ``lambda_of``). Forks without ``benefit``: the first
    pair's Lambda is made here (its cells are every pair's) and kept for the loop: the
    ``lambda_of`` returned gives it back."""
    if len(groups) <= 2:
        return lambda_of
    probe = benefit if benefit is not None and (benefit.method == "exact"
                                                or lambda_of is not None) else None
    if benefit is None and lambda_of is not None:
        first = pair_names(groups, ref)[0]
        probe = made = lambda_of(first)
        inner = lambda_of

        def lambda_of(ab: tuple[int, int]) -> BenefitResult | None:
            return made if tuple(ab) == first else inner(ab)
    terms, what = lambda_terms(probe, N_BOOT)
    check_pair_work(len(groups), terms, what,
                    fix=", or fewer cells (benefit_bins, --benefit-bins)" if "forks" in what
                    else "")
    return lambda_of


def _paired_var(dec: Decomposition, coupled: bool) -> Mapping[str, np.ndarray] | None:
    """The paired variances every pair's se reads: ``dec.paired_var`` when the groups share
    worlds and the engine kept it for every value, else None."""
    pv = getattr(dec, "paired_var", None)
    if not coupled or not dec.se or not pv or any(k not in pv for k in _PAIRED_VALUES):
        return None
    return pv


#: The per-group values whose paired variances a comparison reads (``Decomposition.paired_var``).
_PAIRED_VALUES = ("V", "V_ps", "V_0", "direct", "indirect", "utility")


def _row_of(ab: Sequence[int], groups: Sequence[str], ref: int) -> str:
    """The row of :func:`pair_names` that holds the pair ``ab`` (either orientation)."""
    a, b = (int(i) for i in ab)
    return next(f"{groups[x]}-{groups[y]}" for x, y in pair_names(groups, ref)
                if {x, y} == {a, b})


def benefit_for_pair(benefit: BenefitResult | None, pair: str) -> BenefitResult | None:
    """The benefit result of another ``pair`` of groups (``"A-B"``) from an exact one: its
    Lambda and per-level-pair contributions by the exact formula
    (:func:`causalfair.engines.benefit.lambda_pairs`), e.g. for the worst benefit pairs of
    the pair a ``max_Lambda`` verdict names; ``benefit`` itself when it is already about
    that pair; None when it is not exact (forks pair individuals of one pair only) or
    ``pair`` names no two of its groups. Its ``dpe_prop1`` is NaN: the Proposition-1 DPE
    of another pair needs the state distributions over the horizon, which ``benefit`` does
    not keep (that pair's DPE is in the decomposition's ``pairs``)."""
    if benefit is None:
        return None
    ab = split_pair(pair, benefit.groups)
    if ab is None:
        return None
    if ab == tuple(benefit.pair):
        return benefit
    if benefit.method != "exact":
        return None
    contrib = lambda_pairs(benefit.p_d1, benefit.delta, benefit.state_weights, ab, benefit.eps)
    return replace(benefit, pair=ab, contributions=contrib, Lambda=float(contrib.sum()),
                   dpe_prop1=math.nan)


def lambda_by_forks(system: Any, policy: Any, horizon: int, *, n: int, seed: int, eps: float,
                    alpha: float, jobs: Any = "auto", bins: int = 4,
                    shared: dict | None = None
                    ) -> Callable[[tuple[int, int]], BenefitResult | None]:
    """``lambda_of`` for :func:`compare` on a system without an exact benefit table: Lambda of
    a pair by forks (:func:`causalfair.engines.benefit_mc.benefit_fairness_mc`, ``n`` units
    per group or worlds, ``bins`` quantile bins per feature, its bootstrap interval at level
    1 - ``alpha``). The rollout, the cell means and the bootstrap replicates' are made
    once and shared by every pair; each pair has its own thresholding mask and terms.
    ``shared``: the dict those are kept in, e.g. the one the decomposition's own Lambda
    filled (:func:`causalfair.engines.montecarlo.decompose_mc`'s ``benefit_shared``, with
    the same system, policy, horizon, ``n``, ``seed`` and ``bins``): then they are not made
    again; default a new one."""
    shared = {} if shared is None else shared

    def lambda_of(ab: tuple[int, int]) -> BenefitResult | None:
        return benefit_fairness_mc(system, policy, horizon, n=n, seed=seed, eps=eps,
                                   alpha=alpha, pair=ab, jobs=jobs, shared=shared, bins=bins)
    return lambda_of


def wanted(n_groups: int, reference: Any, thresholds: Mapping[str, Any]) -> bool:
    """Whether an audit compares groups beyond its pair: more than two groups, a reference
    named, or a threshold over groups (:func:`causalfair.thresholds.is_group_key`)."""
    return n_groups > 2 or reference is not None or any(is_group_key(k) for k in thresholds)


def _lambda(dec: Decomposition, benefit: BenefitResult | None,
            lambda_of: Callable[[tuple[int, int]], BenefitResult | None] | None,
            ab: tuple[int, int], z: float) -> Q | None:
    """Lambda of pair ``ab`` with its interval (see :func:`compare`)."""
    if benefit is not None and benefit.method == "exact":
        lam = float(lambda_pairs(benefit.p_d1, benefit.delta, benefit.state_weights, ab,
                                 benefit.eps).sum())
        return (lam, lam, lam, None)
    ben = benefit if benefit is not None and set(benefit.pair) == set(ab) else (
        lambda_of(ab) if lambda_of is not None else None)
    if ben is None:
        return None
    lam = float(ben.Lambda)
    if ben.ci is not None:
        return (lam, float(ben.ci[0]), float(ben.ci[1]), ben.se)
    return (lam, max(0.0, lam - z * ben.se), lam + z * ben.se, ben.se) if ben.se else (
        lam, lam, lam, None)


def _cell(v: float | None, width: int, digits: int) -> str:
    return f"{'-':>{width}}" if v is None else fixed(v, digits, width=width)
