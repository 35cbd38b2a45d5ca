"""Thresholds: every gate, repair and constrained training run reads "quantity <= value".

One home for the rule (docs/audit.md, "Thresholds and verdicts"; method.md section 6 for
the quantities):

- the keys an audit spec's ``[thresholds]`` accepts (:data:`THRESHOLD_KEYS`), which are
  signed (:data:`SIGNED_KEYS`) and which read an absolute value (``abs_*``);
- the CI rule that judges "q <= value" on an interval of q (:func:`judge`, with
  :func:`abs_interval` for ``abs_*`` keys, :func:`judge_key` doing both);
- thresholds as optimisation constraints (:class:`Constraint`,
  :func:`parse_constraint` for ``--constraint abs_C<=0.05``,
  :func:`constraints_from_thresholds` for a spec): the keys the exact repair imposes
  (:data:`EXACT_KEYS`, differentiable on a tabular model) and those the sampled
  PPO-Lagrangian imposes (:data:`PPO_LAG_KEYS`), each also for one pair or every pair of
  groups, and ``min_ratio_V`` (:func:`constraint_key_error` says which key no repair
  imposes, and what to use instead);
- the verdicts: one threshold's :class:`Verdict` and the :func:`overall_verdict` of several;
- thresholds over groups beyond a pair (docs/decomposition.md, "More than two groups"):
  one pair (``abs_C[Black-White]``, :data:`PAIR_KEYS`), every pair (``max_abs_C``,
  :data:`MAX_PAIR_KEYS`) and the ratios (``min_ratio_V``, :data:`MIN_RATIO_KEYS`, which
  read "ratio >= value"), judged by :func:`group_verdicts`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from causalfair._io import as_given, beside, fixed
from causalfair.errors import InputError

__all__ = [
    "PASS", "FAIL", "INCONCLUSIVE", "THRESHOLD_KEYS", "SIGNED_KEYS", "EXACT_KEYS",
    "PPO_LAG_KEYS", "abs_interval", "judge", "judge_key", "Constraint", "parse_constraint",
    "constraints_from_thresholds", "overall_verdict", "Verdict", "PAIR_KEYS",
    "MAX_PAIR_KEYS", "MIN_RATIO_KEYS", "split_key", "is_group_key", "group_key_error",
    "group_verdicts", "deciding_pair", "pair_note", "judge_min", "constraint_key_error", "is_repair_key", "threshold_op",
    "PAIR_VALUED", "audited_pair", "name_pairs", "fixed", "failing",
]

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"


def failing(inconclusive: str) -> frozenset[str]:
    """The verdicts that fail a gate: FAIL, and INCONCLUSIVE unless the gate's
    ``inconclusive`` mode is "pass" (``causalfair gate --inconclusive``; the one rule of
    the gate's exit code, its reports, its retrains and a merged summary's check)."""
    return frozenset({FAIL} if inconclusive == "pass" else {FAIL, INCONCLUSIVE})

#: The other notions of fairness an audit reports beside C and Lambda (the seeds' own).
OTHER_NOTIONS: tuple[str, ...] = ("tpr_gap", "elbert_bias", "w1_final", "dp_gap")
#: Threshold keys: every one reads "quantity <= value".
THRESHOLD_KEYS: tuple[str, ...] = (
    "abs_C", "abs_DPE", "abs_IPE", "abs_SPE", "C", "DPE", "IPE", "SPE", "Lambda",
    *OTHER_NOTIONS,
)
#: Keys whose bound may be negative (the signed effects).
SIGNED_KEYS: tuple[str, ...] = ("C", "DPE", "IPE", "SPE")
#: Threshold keys the exact repair can impose: key -> (metric, absolute value).
EXACT_KEYS: dict[str, tuple[str, bool]] = {
    "abs_C": ("C", True), "abs_DPE": ("DPE", True), "abs_IPE": ("IPE", True),
    "abs_SPE": ("SPE", True), "C": ("C", False), "DPE": ("DPE", False), "IPE": ("IPE", False),
    "SPE": ("SPE", False), "Lambda": ("Lambda", False),
}
#: Thresholds the sampled PPO-Lagrangian imposes (every PPO-family ``[retrain] algo`` on
#: the generic trainer, ``causalfair train --constraint``): every one its audit measures, as
#: the exact repair (docs/training.md, "PPO-Lagrangian": which enter the loss, which only
#: the selection of the kept policy); each also for one pair (``abs_C[A-B]``) and every
#: pair (``max_abs_C``), :func:`is_repair_key`.
PPO_LAG_KEYS: tuple[str, ...] = tuple(EXACT_KEYS)
#: Thresholds over every pair of groups: "the largest value over the pairs <= value"
#: (``max_abs_C``: the largest |C(a-b)|).
MAX_PAIR_KEYS: tuple[str, ...] = ("max_abs_C", "max_abs_DPE", "max_abs_IPE", "max_abs_SPE",
                                  "max_Lambda")
#: Quantities of the audited pair (C and its parts, Lambda, and the gaps between its two
#: groups; ``elbert_bias`` is the largest gap over every group, ``utility`` the
#: population's): a verdict of a key on one of them names that pair (:func:`audited_pair`).
PAIR_VALUED: tuple[str, ...] = ("C", "DPE", "IPE", "SPE", "Lambda", "tpr_gap", "w1_final",
                                "dp_gap")
#: Ratio thresholds: "the smallest ratio over the pairs >= value" (four-fifths rule: 0.8);
#: a ratio is min / max of the two groups' values (docs/decomposition.md).
MIN_RATIO_KEYS: tuple[str, ...] = ("min_ratio_V", "min_ratio_selection")


def threshold_op(key: str) -> str:
    """How the threshold ``key`` (a verdict's key: ``min_ratio_V``, ``abs_C[A-B]``, ``abs_C
    vs baseline``, ...) reads its bound: ``">="`` for the ratios (:data:`MIN_RATIO_KEYS`,
    one pair's included), ``"<="`` for every other key. Every label of a threshold (the
    report, the gate's table and JUnit, gate-merge's Markdown, card.md, annex-iv.md) uses it."""
    return ">=" if key.startswith("min_") else "<="
#: Keys that may address one pair of groups, ``key[A-B]`` (TOML: ``[thresholds.abs_C]``
#: with ``"A-B" = 0.1``): the pair's quantity (A minus B for the signed ones).
PAIR_KEYS: tuple[str, ...] = ("abs_C", "abs_DPE", "abs_IPE", "abs_SPE", "C", "DPE", "IPE",
                              "SPE", "Lambda") + MIN_RATIO_KEYS


def is_repair_key(key: str) -> bool:
    """Whether the repairs (exact and PPO-Lagrangian) impose threshold ``key``: a key of
    :data:`EXACT_KEYS`, one pair's (``abs_C[A-B]``) or every pair's (``max_abs_C``)."""
    return constraint_key_error(key) is None


def abs_interval(lower: float, upper: float) -> tuple[float, float]:
    """The interval of |X| implied by an interval [lower, upper] of X."""
    if lower >= 0:
        return lower, upper
    if upper <= 0:
        return -upper, -lower
    return 0.0, max(-lower, upper)


def judge(lower: float, upper: float, threshold: float) -> str:
    """Verdict of "q <= threshold" given an interval [lower, upper] of q (the CI rule)."""
    if upper <= threshold:
        return PASS
    if lower > threshold:
        return FAIL
    return INCONCLUSIVE


def judge_key(key: str, lower: float, upper: float, threshold: float) -> str:
    """Verdict of threshold ``key <= threshold`` given an interval [lower, upper] of the
    signed quantity (``abs_*`` keys judge the interval of its absolute value)."""
    if key.startswith("abs_"):
        lower, upper = abs_interval(lower, upper)
    return judge(lower, upper, threshold)


# ---------------------------------------------------------------------- verdicts
def overall_verdict(statuses: Sequence[str]) -> str:
    """FAIL if any FAIL, else INCONCLUSIVE if any INCONCLUSIVE, else PASS."""
    if FAIL in statuses:
        return FAIL
    if INCONCLUSIVE in statuses:
        return INCONCLUSIVE
    return PASS


@dataclass(frozen=True)
class Verdict:
    """One threshold's verdict: ``quantity <= threshold`` judged on the CI [lower, upper].
    ``pair``: for a threshold over every pair of groups (``max_*``, ``min_ratio_*``), the
    pair ``"A-B"`` that decides the verdict (:func:`deciding_pair`); for one pair's key
    (``abs_C[A-B]``), that pair; for a threshold on a quantity of the audited pair
    (``abs_C``, ``Lambda``, ``abs_C vs baseline``, :data:`PAIR_VALUED`) with more than two
    groups, the audited pair (:func:`name_pairs`); else None (two groups: the audit's only
    pair, which its decomposition names)."""

    key: str
    threshold: float
    estimate: float
    lower: float
    upper: float
    status: str
    pair: str | None = None

    @property
    def label(self) -> str:
        return f"{self.key} {threshold_op(self.key)} {as_given(self.threshold)}"

    @property
    def shown(self) -> str:
        """:attr:`label` with the pair of a threshold over every pair, as every table of
        verdicts prints it (``max_Lambda <= 0.1 (pair B-E)``)."""
        return self.label + pair_note(self.to_dict())

    def message(self, *, fixed_decimals: bool = False) -> str:
        """``KEY = ESTIMATE (CI [LOWER, UPPER]): STATUS (...)``; numbers to 6 significant
        figures, or with ``fixed_decimals`` to six decimals (:func:`fixed`), as the
        console's tables print them."""
        def num(x: float) -> str:  # on its side of the threshold, never a tie by rounding
            return beside(x, self.threshold, 6, significant=not fixed_decimals)

        if self.lower == self.upper:
            where = num(self.estimate)
        else:
            where = f"{num(self.estimate)} (CI [{num(self.lower)}, {num(self.upper)}])"
        # exact values: the pair attains the estimate; intervals: the estimate and its
        # bounds are each the extreme over the pairs, and the pair decides the status
        at = pair_note(self.to_dict(), " at pair {}" if self.lower == self.upper
                       else ", pair {} deciding", of=" for pair {}")
        rel = {PASS: "within", FAIL: "outside", INCONCLUSIVE: "straddles"}[self.status]
        return f"{self.key} = {where}{at}: {self.status} ({rel} threshold {as_given(self.threshold)})"

    def to_dict(self) -> dict[str, Any]:
        out = {"key": self.key, "threshold": self.threshold, "estimate": self.estimate,
               "lower": self.lower, "upper": self.upper, "status": self.status}
        if self.pair is not None:
            out["pair"] = self.pair
        return out


def pair_note(verdict: Mapping[str, Any], form: str = " (pair {})", of: str = " (pair {})"
              ) -> str:
    """The pair of a verdict (a :class:`Verdict` or its dict, as in audit.json) as every
    door that prints a verdict (the tables, the report's sentences, the gate's JUnit
    message and Markdown) names it: ``form`` filled with it for a threshold over every pair
    of groups (``max_*``, ``min_ratio_*``: the pair that decides it), ``of`` filled with it
    for a threshold on the audited pair (``abs_C`` with more than two groups), ``""`` for
    any other verdict (one pair's key names its pair itself; no pair)."""
    pair = verdict.get("pair")
    base, own = split_key(str(verdict.get("key")))
    if not pair or own is not None:
        return ""
    return (form if base in MAX_PAIR_KEYS or base in MIN_RATIO_KEYS else of).format(pair)


def audited_pair(key: str, groups: Sequence[str], pair: Sequence[int]) -> str | None:
    """The pair ``"A-B"`` a verdict of threshold ``key`` is about on an audit of ``groups``
    that compares ``pair`` (group indices, A minus B): for a key on a quantity of that pair
    (:data:`PAIR_VALUED`, its ``abs_`` form, and their ``... vs baseline`` forms) with more
    than two groups; None with two groups (the audit's only pair) and for any other key
    (``max_*``, ``min_ratio_*`` and ``KEY[A-B]`` carry their own; ``elbert_bias``, the
    utility drop)."""
    base = str(key).removesuffix(" vs baseline")
    base = base[len("abs_"):] if base.startswith("abs_") else base
    if len(groups) <= 2 or base not in PAIR_VALUED:
        return None
    a, b = pair
    return f"{groups[a]}-{groups[b]}"


def name_pairs(verdicts: Sequence[Verdict], groups: Sequence[str], pair: Sequence[int]
               ) -> list[Verdict]:
    """``verdicts`` of an audit of ``groups`` that compares ``pair`` (group indices), each
    without a pair given the one it is about (:func:`audited_pair`): the one place an
    audit's verdicts on its own pair are named (audit.json, gate.json, the tables, JUnit)."""
    out = []
    for v in verdicts:
        p = None if v.pair is not None else audited_pair(v.key, groups, pair)
        out.append(v if p is None else replace(v, pair=p))
    return out


# ---------------------------------------------------------------------- groups
def judge_min(lower: float, upper: float, threshold: float) -> str:
    """Verdict of "q >= threshold" given an interval [lower, upper] of q (the CI rule)."""
    return judge(-upper, -lower, -threshold)


def split_key(key: str) -> tuple[str, str | None]:
    """``"abs_C[Black-White]"`` -> ("abs_C", "Black-White"); ``"abs_C"`` -> ("abs_C", None)."""
    k = str(key)
    if k.endswith("]") and "[" in k:
        base, _, rest = k.partition("[")
        return base, rest[:-1]
    return k, None


def is_group_key(key: str) -> bool:
    """Whether ``key`` is a threshold over groups beyond one pair (a pair-addressed key,
    ``max_*`` or ``min_ratio_*``)."""
    base, pair = split_key(key)
    return pair is not None or base in MAX_PAIR_KEYS or base in MIN_RATIO_KEYS


def group_key_error(key: str) -> str | None:
    """Why ``key`` is not a threshold key over groups (None when it is one)."""
    base, pair = split_key(key)
    if pair is not None:
        if base not in PAIR_KEYS:
            return (f"{base!r} cannot address a pair; keys that can: {', '.join(PAIR_KEYS)} "
                    "(write key[A-B], or a table [thresholds.KEY] with \"A-B\" = value).")
        if not pair:
            return "empty pair name; write key[A-B] with two group names."
        return None
    if base in MAX_PAIR_KEYS or base in MIN_RATIO_KEYS:
        return None
    return "unknown key"


def _over_pairs(key: str, qs: Sequence[tuple[float, float, float, Any]]
                ) -> tuple[float, float, float]:
    """(estimate, lower, upper) of the largest (``max_*``) or smallest (``min_*``) value
    over the pairs: the extreme of the estimates and of each bound (judging it is judging
    every pair and keeping the worst verdict). A NaN (a pair's unknown value) is skipped,
    except in the bound that decides a PASS (``max_*``: upper; ``min_*``: lower), where it
    makes the verdict INCONCLUSIVE as that pair's own, whatever the pairs' order."""
    low = key.startswith("min_")
    pick = min if low else max

    def extreme(values: list[float], nan_decides: bool) -> float:
        known = [v for v in values if v == v]
        return math.nan if not known or (nan_decides and len(known) < len(values)) \
            else pick(known)
    return (extreme([q[0] for q in qs], False), extreme([q[1] for q in qs], low),
            extreme([q[2] for q in qs], not low))


_RANK = {FAIL: 2, INCONCLUSIVE: 1, PASS: 0}


def deciding_pair(key: str, qs: Mapping[str, tuple[float, float, float, Any]],
                  threshold: float) -> str:
    """The pair that decides the verdict of threshold ``key`` over every pair (``max_*``,
    ``min_ratio_*``) given each pair's (estimate, lower, upper) ``qs`` (absolute values for
    ``abs_*``): among the pairs whose own verdict is the worst (FAIL, else INCONCLUSIVE,
    else PASS), the one with the largest (``min_*``: smallest) estimate, the first in
    ``qs``'s order on a tie. With exact values it is the pair attaining the extreme."""
    lo_side = key.startswith("min_")

    def rank(item: tuple[str, tuple[float, float, float, Any]]) -> tuple[int, float]:
        q = item[1]
        status = judge_min(q[1], q[2], threshold) if lo_side else judge(q[1], q[2], threshold)
        return (_RANK[status], -q[0] if lo_side else q[0])
    return max(qs.items(), key=rank)[0]


def group_verdicts(thresholds: Mapping[str, float], comparison: Any) -> list[Verdict]:
    """Verdicts of the thresholds over groups (:func:`is_group_key`) on a
    :class:`causalfair.engines.groups.GroupComparison`. A pair naming no two groups is
    refused naming the groups; a quantity not available (Lambda without a benefit table,
    ratio_selection without selection rates, a ratio of non-positive values) is refused by
    name."""
    out = []
    for key, thr in thresholds.items():
        if not is_group_key(key):
            continue
        base, pair = split_key(key)
        metric = base[len("min_"):] if base.startswith("min_") else (
            base[len("max_"):] if base.startswith("max_") else base)
        absolute = metric.startswith("abs_")
        metric = metric[len("abs_"):] if absolute else metric
        if pair is not None:
            q = comparison.quantity(pair, metric, where=key)
            by = {} if q is None else {pair: q}
        else:
            by = comparison.by_pair(metric)
            if len(by) < len(comparison.pairs):
                by = {}
        if not by:
            raise InputError(
                f"threshold {key}: {metric} is not available for "
                f"{'pair ' + repr(pair) if pair else 'every pair'} in this audit (Lambda needs a "
                "benefit table, ratio_selection selection rates, a ratio two positive values).")
        by = {p: (q[0], *(math.nan if v is None else v for v in q[1:3])) for p, q in by.items()}
        if absolute:  # no interval (None): NaN bounds, never a PASS
            by = {p: (abs(q[0]),) + abs_interval(q[1], q[2]) for p, q in by.items()}
        e, lo, hi = _over_pairs(base, list(by.values()))
        status = judge_min(lo, hi, thr) if base.startswith("min_") else judge(lo, hi, thr)
        out.append(Verdict(key=key, threshold=float(thr), estimate=float(e), lower=float(lo),
                           upper=float(hi), status=status,
                           pair=pair if pair is not None else deciding_pair(base, by, thr)))
    return out


# ---------------------------------------------------------------------- constraints
def constraint_key_error(key: str) -> str | None:
    """Why threshold ``key`` cannot be a repair's constraint (None when it can): the keys
    of :data:`EXACT_KEYS`, one pair's (``abs_C[A-B]``) and every pair's (``max_abs_C``,
    ``max_Lambda``), and the ratio of mean gains ``min_ratio_V`` (every pair, or one:
    ``min_ratio_V[A-B]``), which every repair imposes (the exact one on a tabular model,
    PPO-Lagrangian on any system)."""
    base, pair = split_key(key)
    if base == "min_ratio_selection":
        return (f"{base}: the selection rates are not measured by the repairs' audits; bound "
                "the ratio of mean gains (min_ratio_V) or the difference (max_abs_C) instead, "
                "or drop it")
    if base in MIN_RATIO_KEYS:
        return None if pair is None or pair else "empty pair name; write key[A-B]"
    if pair is not None:
        if base not in EXACT_KEYS:
            return f"{base!r} cannot address a pair; keys that can: {', '.join(EXACT_KEYS)}"
        if not pair:
            return "empty pair name; write key[A-B] with two group names"
        return None
    if base in MAX_PAIR_KEYS or base in EXACT_KEYS:
        return None
    return (f"unknown or not repairable; allowed keys: {', '.join(EXACT_KEYS)}, "
            f"KEY[A-B] for one pair, {', '.join(MAX_PAIR_KEYS)} for every pair (each reads "
            "'quantity <= value'), min_ratio_V ('ratio >= value')")


@dataclass(frozen=True)
class Constraint:
    """``key <= bound`` for a threshold key of an audit spec (``abs_C``, ``Lambda``, ...),
    of one pair of groups (``abs_C[Black-White]``: that pair's quantity) or of every pair
    (``max_abs_C``: :meth:`for_pairs` makes it one constraint per pair); ``key >= bound``
    for the ratio ``min_ratio_V`` (:attr:`at_least`; ratio_V = min / max of the pair's
    mean gains, docs/decomposition.md)."""

    key: str
    bound: float

    def __post_init__(self) -> None:
        why = constraint_key_error(self.key)
        if why is not None:
            raise InputError(f"constraint {self.key!r}: {why}.")
        b = self.bound
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b):
            raise InputError(f"constraint {self.key}: bound must be a finite number, got {b!r}.")
        if (self.absolute or (not self.at_least and self.metric == "Lambda")) and b < 0:
            what = "an absolute value" if self.absolute else "Lambda (a sum of absolute values)"
            raise InputError(f"constraint {self.key}: bound {b:g} < 0 can never hold for "
                             f"{what}; use a bound >= 0.")
        if self.at_least and b > 1:
            raise InputError(f"constraint {self.key}: bound {b:g} > 1 can never hold for a "
                             "ratio min / max (at most 1); use a bound in [0, 1].")
        object.__setattr__(self, "bound", float(b))

    @property
    def base(self) -> str:
        """The key of :data:`EXACT_KEYS` it bounds (``abs_C`` for ``abs_C[A-B]`` and
        ``max_abs_C``), or ``min_ratio_V``."""
        base = split_key(self.key)[0]
        return base[len("max_"):] if base in MAX_PAIR_KEYS else base

    @property
    def at_least(self) -> bool:
        """It reads "quantity >= bound" (a ratio, ``min_ratio_V``)."""
        return self.base in MIN_RATIO_KEYS

    def excess(self, value: Any) -> Any:
        """How far ``value`` of the constrained quantity is beyond the bound (> 0: violated;
        ``value - bound``, or ``bound - value`` for a ratio)."""
        return self.bound - value if self.at_least else value - self.bound

    @property
    def pair(self) -> str | None:
        """The pair ``"A-B"`` it addresses (None: the audit's own pair, or every pair)."""
        return split_key(self.key)[1]

    @property
    def every_pair(self) -> bool:
        """A ``max_*`` key or a ratio without a pair: the bound holds for every pair."""
        base, pair = split_key(self.key)
        return base in MAX_PAIR_KEYS or (base in MIN_RATIO_KEYS and pair is None)

    def for_pairs(self, pairs: Sequence[str]) -> list[Constraint]:
        """One constraint per pair for a ``max_*`` key (``max_abs_C`` over pairs "B-A",
        "C-A" -> ``abs_C[B-A]``, ``abs_C[C-A]``: the largest holds iff each does) and for
        ``min_ratio_V``; itself otherwise."""
        if not self.every_pair:
            return [self]
        return [Constraint(f"{self.base}[{p}]", self.bound) for p in pairs]

    @property
    def metric(self) -> str:
        return self.base[len("min_"):] if self.at_least else EXACT_KEYS[self.base][0]

    @property
    def absolute(self) -> bool:
        return not self.at_least and EXACT_KEYS[self.base][1]

    @property
    def label(self) -> str:
        return f"{self.key} {'>=' if self.at_least else '<='} {self.bound:g}"

    @property
    def text(self) -> str:
        """As :func:`parse_constraint` reads it (``"abs_C<=0.05"``, ``"min_ratio_V>=0.8"``)."""
        return f"{self.key}{'>=' if self.at_least else '<='}{self.bound!r}"

    def value(self, metrics: Mapping[str, Any]) -> Any:
        """The constrained quantity (|C| for ``abs_C``) from a metrics mapping (floats
        or torch scalars): ``metrics["C"]`` for the audit's pair, ``metrics["C[A-B]"]``
        (the signed quantity of A minus B) for a constraint of pair A-B."""
        v = metrics[self.metric if self.pair is None else f"{self.metric}[{self.pair}]"]
        return abs(v) if self.absolute else v

    def holds(self, metrics: Mapping[str, Any]) -> bool:
        return float(self.excess(self.value(metrics))) <= 0.0

    def interval(self, lower: float, upper: float) -> tuple[float, float]:
        """The interval of the constrained quantity (|X| for ``abs_*`` keys) given an
        interval [lower, upper] of the signed metric; its far end is what the CI rule
        compares with the bound."""
        return abs_interval(lower, upper) if self.absolute else (lower, upper)

    def judge(self, lower: float, upper: float) -> str:
        """The CI rule on an interval [lower, upper] of the signed metric."""
        if self.at_least:
            return judge_min(lower, upper, self.bound)
        return judge_key(self.base, lower, upper, self.bound)


def parse_constraint(text: str) -> Constraint:
    """``"abs_C<=0.05"`` -> Constraint("abs_C", 0.05); ``"abs_C[A-B]<=0.05"`` for a pair;
    ``"min_ratio_V>=0.8"`` for a ratio."""
    key, sep, val = str(text).partition("<=")
    if not sep and ">=" in str(text):
        key, sep, val = str(text).partition(">=")
        if split_key(key.strip())[0] not in MIN_RATIO_KEYS:
            raise InputError(f"--constraint {text!r}: only a ratio (min_ratio_V) reads '>='; "
                             "write QUANTITY<=VALUE such as abs_C<=0.05.")
    elif sep and split_key(key.strip())[0] in MIN_RATIO_KEYS:
        raise InputError(f"--constraint {text!r}: a ratio is bounded from below; write "
                         f"{key.strip()}>={val.strip()}.")
    if not sep:
        raise InputError(f"--constraint: expected QUANTITY<=VALUE such as abs_C<=0.05, got {text!r}.")
    try:
        bound = float(val)
    except ValueError:
        raise InputError(f"--constraint {text!r}: {val.strip()!r} is not a number.") from None
    return Constraint(key.strip(), bound)


def constraints_from_thresholds(thresholds: Mapping[str, float], where: str = "[thresholds]",
                                who: str = "the exact repair") -> list[Constraint]:
    """The spec's thresholds as constraints, every one of them (a ``max_*`` key stays one
    constraint here; the repair expands it over the pairs); a threshold no repair can
    impose (a Monte Carlo or log metric such as ``tpr_gap``, a ratio) is refused by name
    with what to use instead."""
    out = []
    for k, v in thresholds.items():
        why = constraint_key_error(k)
        if why is not None:
            raise InputError(
                f"{where} {k}: {who} cannot impose this threshold ({why}). Drop the "
                "threshold, or run the gate without --retrain.")
        out.append(Constraint(k, v))
    if not out:
        raise InputError(f"{where}: no thresholds, so nothing to repair; add one such as abs_C = 0.05.")
    return out
