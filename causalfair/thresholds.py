"""Verdicts: the CI rule that turns an estimate and its interval into PASS / FAIL /
INCONCLUSIVE for a threshold "quantity <= value"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["PASS", "FAIL", "INCONCLUSIVE", "abs_interval", "judge", "overall_verdict", "Verdict"]

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"

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


