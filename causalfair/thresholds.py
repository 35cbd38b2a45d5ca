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
  PPO-Lagrangian imposes (:data:`PPO_LAG_KEYS`);
- the verdicts: one threshold's :class:`Verdict` and the :func:`overall_verdict` of several.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from causalfair.errors import InputError

__all__ = [
    "PASS", "FAIL", "INCONCLUSIVE", "THRESHOLD_KEYS", "SIGNED_KEYS", "EXACT_KEYS",
    "PPO_LAG_KEYS", "abs_interval", "judge", "judge_key", "Constraint", "parse_constraint",
    "constraints_from_thresholds", "overall_verdict", "Verdict",
]

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"

#: Threshold keys: every one reads "quantity <= value".
THRESHOLD_KEYS: tuple[str, ...] = (
    "abs_C", "abs_DPE", "abs_IPE", "abs_SPE", "C", "DPE", "IPE", "SPE",
    "Lambda", "tpr_gap", "elbert_bias", "w1_final", "dp_gap",
)
#: Keys whose bound may be negative (the signed effects).
SIGNED_KEYS: tuple[str, ...] = ("C", "DPE", "IPE", "SPE")
#: Threshold keys the exact repair can impose: key -> (metric, absolute value).
EXACT_KEYS: dict[str, tuple[str, bool]] = {
    "abs_C": ("C", True), "abs_DPE": ("DPE", True), "abs_IPE": ("IPE", True),
    "abs_SPE": ("SPE", True), "C": ("C", False), "DPE": ("DPE", False), "IPE": ("IPE", False),
    "SPE": ("SPE", False), "Lambda": ("Lambda", False),
}
#: Thresholds the sampled PPO-Lagrangian imposes (``[retrain] algo = "ppo-lag"``,
#: ``causalfair train --algo ppo-c --constraint``).
PPO_LAG_KEYS: tuple[str, ...] = ("abs_C", "C")


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
    """One threshold's verdict: ``quantity <= threshold`` judged on the CI [lower, upper]."""

    key: str
    threshold: float
    estimate: float
    lower: float
    upper: float
    status: str

    @property
    def label(self) -> str:
        return f"{self.key} <= {self.threshold:g}"

    def message(self) -> str:
        if self.lower == self.upper:
            where = f"{self.estimate:.6g}"
        else:
            where = f"{self.estimate:.6g} (CI [{self.lower:.6g}, {self.upper:.6g}])"
        rel = {PASS: "within", FAIL: "outside", INCONCLUSIVE: "straddles"}[self.status]
        return f"{self.key} = {where}: {self.status} ({rel} threshold {self.threshold:g})"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "threshold": self.threshold, "estimate": self.estimate,
                "lower": self.lower, "upper": self.upper, "status": self.status}


# ---------------------------------------------------------------------- constraints
@dataclass(frozen=True)
class Constraint:
    """``key <= bound`` for a threshold key of an audit spec (``abs_C``, ``Lambda``, ...)."""

    key: str
    bound: float

    def __post_init__(self) -> None:
        if self.key not in EXACT_KEYS:
            raise InputError(
                f"constraint {self.key!r}: unknown or not repairable; allowed keys: "
                f"{', '.join(EXACT_KEYS)} (each reads 'quantity <= value').")
        b = self.bound
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b):
            raise InputError(f"constraint {self.key}: bound must be a finite number, got {b!r}.")
        if EXACT_KEYS[self.key][1] and b < 0:
            raise InputError(f"constraint {self.key}: bound {b:g} < 0 can never hold for an "
                             "absolute value; use a bound >= 0.")
        object.__setattr__(self, "bound", float(b))

    @property
    def metric(self) -> str:
        return EXACT_KEYS[self.key][0]

    @property
    def label(self) -> str:
        return f"{self.key} <= {self.bound:g}"

    def value(self, metrics: Mapping[str, Any]) -> Any:
        """The constrained quantity (|C| for ``abs_C``) from a metrics mapping (floats
        or torch scalars)."""
        v = metrics[self.metric]
        return abs(v) if EXACT_KEYS[self.key][1] else v

    def holds(self, metrics: Mapping[str, Any]) -> bool:
        return float(self.value(metrics)) <= self.bound

    def judge(self, lower: float, upper: float) -> str:
        """The CI rule on an interval [lower, upper] of the signed metric."""
        return judge_key(self.key, lower, upper, self.bound)


def parse_constraint(text: str) -> Constraint:
    """``"abs_C<=0.05"`` -> Constraint("abs_C", 0.05)."""
    key, sep, val = str(text).partition("<=")
    if not sep:
        raise InputError(f"--constraint: expected QUANTITY<=VALUE such as abs_C<=0.05, got {text!r}.")
    try:
        bound = float(val)
    except ValueError:
        raise InputError(f"--constraint {text!r}: {val.strip()!r} is not a number.") from None
    return Constraint(key.strip(), bound)


def constraints_from_thresholds(thresholds: Mapping[str, float], where: str = "[thresholds]",
                                ) -> list[Constraint]:
    """The spec's thresholds as constraints; a threshold the exact repair cannot impose
    (a Monte Carlo or log metric such as ``tpr_gap``) is refused by name."""
    out = []
    for k, v in thresholds.items():
        if k not in EXACT_KEYS:
            raise InputError(
                f"{where} {k}: the exact repair cannot impose this threshold; it imposes "
                f"{', '.join(EXACT_KEYS)}. Use a [retrain] algo of the sampled trainer, or "
                "drop the threshold.")
        out.append(Constraint(k, v))
    if not out:
        raise InputError(f"{where}: no thresholds, so nothing to repair; add one such as abs_C = 0.05.")
    return out
